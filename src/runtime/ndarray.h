/// Dense row-major arrays that compiled kernels read and write, and their numeric comparison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "te/dtype.h"

namespace tessera {

/// A 64-byte aligned, dense row-major array, owned or a view of memory owned elsewhere. Movable,
/// not copyable (use copy(), which owns).
class NDArray {
 public:
  NDArray() = default;
  /// A zero-filled array.
  static NDArray empty(std::vector<int64_t> shape, DType dtype);
  /// An array over `data`, which must outlive it and hold the shape's elements.
  static NDArray view(void* data, std::vector<int64_t> shape, DType dtype);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  template <typename T>
  T* data_as() {
    return static_cast<T*>(data());
  }
  template <typename T>
  const T* data_as() const {
    return static_cast<const T*>(data());
  }
  size_t num_elements() const { return num_elements_; }
  size_t bytes() const { return num_elements_ * static_cast<size_t>(dtype_bytes(dtype_)); }

  /// Element i (flat index) converted to double, and back.
  double get(size_t i) const;
  void set(size_t i, double value);

  /// Uniform values in [lo, hi); integers are uniform in [lo, hi], bools are 0 or 1. The same
  /// seed gives the same values on every platform.
  void fill_random(uint64_t seed, double lo = -1, double hi = 1);
  void fill(double value);
  std::vector<double> to_doubles() const;
  void from_doubles(const std::vector<double>& values);
  NDArray copy() const;

 private:
  struct Free {
    // No default argument or member initializer: inside NDArray either would leave Free not
    // default-constructible until NDArray is complete, and unique_ptr needs it to be.
    Free() noexcept : owned(true) {}
    explicit Free(bool owns) noexcept : owned(owns) {}
    bool owned;
    void operator()(void* p) const;
  };
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  size_t num_elements_ = 0;
  std::unique_ptr<void, Free> data_;
};

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

/// Tolerances for comparing a kernel with a reference: float32 1e-4, float64 1e-9, integers and
/// bools exact. For a reduction over `reduction_length` terms float tolerances grow with
/// sqrt(length / 64), since reordered sums (split, rfactor, FMA) differ by rounding that grows
/// roughly with the square root of the number of terms.
Tolerance default_tolerance(DType dtype, int64_t reduction_length = 1);

struct CompareResult {
  bool ok = true;
  double max_abs_err = 0;
  double max_rel_err = 0;
  /// Flat index of the first element out of tolerance; num_elements() when all are within.
  size_t first_bad = 0;
  /// Empty when ok; otherwise says where and by how much the arrays differ.
  std::string message;
};

/// Element-wise |actual - expected| <= atol + rtol * |expected| (NaN equals NaN, infinities must
/// match exactly). Shapes and dtypes must agree.
CompareResult compare(const NDArray& actual, const NDArray& expected, double rtol, double atol);
CompareResult compare(const NDArray& actual, const NDArray& expected, Tolerance tol);
/// With default_tolerance(expected.dtype()).
CompareResult compare(const NDArray& actual, const NDArray& expected);

}  // namespace tessera
