#include "runtime/isa.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/module.h"
#include "te/error.h"

namespace tessera {
namespace {

TEST(Isa, DetectsTheWidestVectorIsaOfTheCpuFlags) {
  EXPECT_EQ(detect_isa_kind("fpu sse4_2 avx avx2 fma avx512f avx512bw"), IsaKind::kAvx512);
  EXPECT_EQ(detect_isa_kind("fpu sse4_2 avx avx2 fma bmi2"), IsaKind::kAvx2);
  // AVX2 without FMA (and a flag that only contains the name) is not the AVX2 target.
  EXPECT_EQ(detect_isa_kind("fpu sse4_2 avx avx2"), IsaKind::kSse);
  EXPECT_EQ(detect_isa_kind("fpu avx512fxyz avx2 fma"), IsaKind::kAvx2);
}

TEST(Isa, LanesRegistersAndFlagsFollowTheIsa) {
  Isa avx512 = make_isa(IsaKind::kAvx512, "");
  EXPECT_EQ(avx512.f32_lanes, 16);
  EXPECT_EQ(avx512.vector_registers, 32);
  EXPECT_FALSE(avx512.overridden);
  EXPECT_EQ(avx512.compile_flags, std::vector<std::string>{"-mprefer-vector-width=512"});

  // The override on an AVX-512 CPU compiles what an AVX2 CPU runs.
  Isa held = make_isa(IsaKind::kAvx512, "avx2");
  EXPECT_EQ(held.name, "avx2");
  EXPECT_EQ(held.f32_lanes, 8);
  EXPECT_EQ(held.vector_registers, 16);
  EXPECT_TRUE(held.overridden);
  EXPECT_EQ(held.compile_flags, std::vector<std::string>{"-mno-avx512f"});

  // A real AVX2 CPU needs no flag beyond -march=native.
  Isa native = make_isa(IsaKind::kAvx2, "native");
  EXPECT_EQ(native.f32_lanes, 8);
  EXPECT_FALSE(native.overridden);
  EXPECT_TRUE(native.compile_flags.empty());
}

TEST(Isa, AnUnknownOrTooWideIsaIsRefusedWithTheReason) {
  try {
    make_isa(IsaKind::kAvx2, "avx512");
    ADD_FAILURE() << "avx512 accepted on an AVX2 CPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("asks for more than this CPU has (avx2)"),
              std::string::npos)
        << e.what();
  }
  try {
    make_isa(IsaKind::kAvx512, "neon");
    ADD_FAILURE() << "neon accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TESSERA_ISA=neon is not an ISA"), std::string::npos)
        << e.what();
  }
}

// The process's kernels are compiled for the process's ISA (under the avx2 ctest run too).
TEST(Isa, DefaultCompileFlagsCarryTheTargetIsa) {
  std::vector<std::string> flags = default_compile_flags();
  for (const std::string& f : target_isa().compile_flags)
    EXPECT_NE(std::find(flags.begin(), flags.end(), f), flags.end()) << f;
}

}  // namespace
}  // namespace tessera
