#include "runtime/ndarray.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "te/error.h"

namespace tessera {

void NDArray::Free::operator()(void* p) const {
  if (owned) std::free(p);
}

namespace {

size_t checked_elements(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) throw_error("NDArray dimension must be positive, got {}", d);
    n *= static_cast<size_t>(d);
  }
  return n;
}

}  // namespace

NDArray NDArray::view(void* data, std::vector<int64_t> shape, DType dtype) {
  NDArray a;
  a.dtype_ = dtype;
  a.num_elements_ = checked_elements(shape);
  a.shape_ = std::move(shape);
  a.data_ = std::unique_ptr<void, Free>(data, Free{false});
  return a;
}

NDArray NDArray::empty(std::vector<int64_t> shape, DType dtype) {
  NDArray a;
  a.dtype_ = dtype;
  a.num_elements_ = checked_elements(shape);
  a.shape_ = std::move(shape);
  // aligned_alloc wants a size that is a multiple of the alignment (and non-zero).
  const size_t bytes = std::max<size_t>(64, (a.bytes() + 63) / 64 * 64);
  a.data_.reset(std::aligned_alloc(64, bytes));
  if (!a.data_) throw_error("NDArray: out of memory allocating {} bytes", bytes);
  std::memset(a.data_.get(), 0, bytes);
  return a;
}

double NDArray::get(size_t i) const {
  switch (dtype_) {
    case DType::kBool:
      return data_as<bool>()[i] ? 1.0 : 0.0;
    case DType::kInt32:
      return data_as<int32_t>()[i];
    case DType::kFloat32:
      return data_as<float>()[i];
    case DType::kFloat64:
      return data_as<double>()[i];
  }
  return 0;
}

void NDArray::set(size_t i, double value) {
  switch (dtype_) {
    case DType::kBool:
      data_as<bool>()[i] = value != 0;
      break;
    case DType::kInt32:
      data_as<int32_t>()[i] = static_cast<int32_t>(value);
      break;
    case DType::kFloat32:
      data_as<float>()[i] = static_cast<float>(value);
      break;
    case DType::kFloat64:
      data_as<double>()[i] = value;
      break;
  }
}

void NDArray::fill_random(uint64_t seed, double lo, double hi) {
  // mt19937_64's output is fixed by the standard; the distributions are not, so map by hand.
  std::mt19937_64 rng(seed);
  auto unit = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };  // [0, 1)
  for (size_t i = 0; i < num_elements_; ++i) {
    double u = unit();
    switch (dtype_) {
      case DType::kBool:
        set(i, u < 0.5 ? 0 : 1);
        break;
      case DType::kInt32: {
        const double a = std::ceil(lo), b = std::floor(hi);
        set(i, std::min(b, a + std::floor(u * (b - a + 1))));
        break;
      }
      case DType::kFloat32:
      case DType::kFloat64:
        set(i, lo + (hi - lo) * u);
        break;
    }
  }
}

void NDArray::fill(double value) {
  for (size_t i = 0; i < num_elements_; ++i) set(i, value);
}

std::vector<double> NDArray::to_doubles() const {
  std::vector<double> out(num_elements_);
  for (size_t i = 0; i < num_elements_; ++i) out[i] = get(i);
  return out;
}

void NDArray::from_doubles(const std::vector<double>& values) {
  if (values.size() != num_elements_) {
    throw_error("NDArray::from_doubles: {} values for {} elements", values.size(), num_elements_);
  }
  for (size_t i = 0; i < num_elements_; ++i) set(i, values[i]);
}

NDArray NDArray::copy() const {
  if (!data_) return NDArray();
  NDArray c = empty(shape_, dtype_);
  std::memcpy(c.data(), data(), bytes());
  return c;
}

Tolerance default_tolerance(DType dtype, int64_t reduction_length) {
  const double scale = std::max(1.0, std::sqrt(static_cast<double>(reduction_length) / 64.0));
  switch (dtype) {
    case DType::kFloat32:
      return {1e-4 * scale, 1e-4 * scale};
    case DType::kFloat64:
      return {1e-9 * scale, 1e-9 * scale};
    case DType::kBool:
    case DType::kInt32:
      return {0, 0};
  }
  return {};
}

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::vector<int64_t> unflatten(size_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = static_cast<int64_t>(flat % static_cast<size_t>(shape[d]));
    flat /= static_cast<size_t>(shape[d]);
  }
  return idx;
}

}  // namespace

CompareResult compare(const NDArray& actual, const NDArray& expected, double rtol, double atol) {
  CompareResult r;
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape()) {
    r.ok = false;
    r.message = fmt::format("mismatched arrays: actual {}{} vs expected {}{}",
                            dtype_name(actual.dtype()), shape_str(actual.shape()),
                            dtype_name(expected.dtype()), shape_str(expected.shape()));
    return r;
  }
  const size_t n = expected.num_elements();
  r.first_bad = n;
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = actual.get(i), e = expected.get(i);
    bool good;
    if (std::isnan(a) || std::isnan(e)) {
      good = std::isnan(a) && std::isnan(e);
    } else if (std::isinf(a) || std::isinf(e)) {
      good = a == e;
    } else {
      const double abs_err = std::fabs(a - e);
      r.max_abs_err = std::max(r.max_abs_err, abs_err);
      if (e != 0) r.max_rel_err = std::max(r.max_rel_err, abs_err / std::fabs(e));
      good = abs_err <= atol + rtol * std::fabs(e);
    }
    if (!good) {
      if (bad++ == 0) r.first_bad = i;
    }
  }
  if (bad > 0) {
    r.ok = false;
    const size_t i = r.first_bad;
    r.message = fmt::format(
        "{} of {} elements differ (rtol {:g}, atol {:g}); first at {} (flat {}): actual {:.9g}, "
        "expected {:.9g}; max abs err {:.3g}, max rel err {:.3g}",
        bad, n, rtol, atol, shape_str(unflatten(i, expected.shape())), i, actual.get(i),
        expected.get(i), r.max_abs_err, r.max_rel_err);
  }
  return r;
}

CompareResult compare(const NDArray& actual, const NDArray& expected, Tolerance tol) {
  return compare(actual, expected, tol.rtol, tol.atol);
}

CompareResult compare(const NDArray& actual, const NDArray& expected) {
  return compare(actual, expected, default_tolerance(expected.dtype()));
}

}  // namespace tessera
