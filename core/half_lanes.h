// One register of f32 lanes at the avx2 and avx512 levels (core/isa.h): 8 with AVX2, 16 with
// AVX-512, their arithmetic, and f16/bf16 lanes loaded straight into f32 lanes and rounded back.
// The f16 conversions are the hardware's vcvtph2ps / vcvtps2ph, which round the same way as
// the portable code (core/half_convert.h); vcvtps2ph keeps a NaN's payload, so NaNs are then
// made the portable code's sign | 0x7e00 (canonical_nan). bf16 rounds with the portable code's
// integer formula (AVX-512 BF16's vcvtneps2bf16 would flush subnormals to zero). min/max are
// the scalar selects lane by lane, so every level gives the same bits. load_pair / store_pair
// move two registers' worth (2 x kLanes elements) for loops whose ops are lane-wise: the pair
// may come in an order of its own (avx2 bf16 does: even elements in one register, odd in the
// other, no unpacking in or packing out), so store_pair takes only what load_pair gave; and at
// avx2 the NaN fix-up runs only where one of the pair's lanes is NaN. Included only by the
// translation units of the levels built with F16C (internal linkage, as half_convert.h).
#pragma once

#if !defined(__F16C__) || !defined(__AVX2__)
#error "core/half_lanes.h needs a level built with AVX2 and F16C"
#endif

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace ringlet::core::lanes {

namespace {

constexpr int kRoundNearestEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// vcvtps2ph turns a NaN into sign | 0x7e00 | its payload's top bits; the portable code (and
// core's) gives sign | 0x7e00. A half is NaN when its magnitude bits exceed 0x7c00 (a signed
// 16-bit compare is right, as they are below 0x8000): clear the payload there.
inline __m128i canonical_nan(__m128i h) {
  const __m128i nan =
      _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)), _mm_set1_epi16(0x7c00));
  return _mm_andnot_si128(_mm_and_si128(nan, _mm_set1_epi16(0x01ff)), h);
}
inline __m256i canonical_nan(__m256i h) {
  const __m256i nan =
      _mm256_cmpgt_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7fff)), _mm256_set1_epi16(0x7c00));
  return _mm256_andnot_si256(_mm256_and_si256(nan, _mm256_set1_epi16(0x01ff)), h);
}

#if defined(__AVX512F__)
using VecF = __m512;
constexpr std::size_t kLanes = 16;

inline VecF vec_add(VecF a, VecF b) { return _mm512_add_ps(a, b); }
inline VecF vec_mul(VecF a, VecF b) { return _mm512_mul_ps(a, b); }
inline VecF vec_div(VecF a, VecF b) { return _mm512_div_ps(a, b); }
inline VecF vec_set(float x) { return _mm512_set1_ps(x); }
inline VecF vec_load(const float* p) { return _mm512_loadu_ps(p); }
// (a < b || a != a) ? a : b, and the same with >: NaN from either side, as the scalar ops.
inline VecF vec_min(VecF a, VecF b) {
  const __mmask16 take_a =
      _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ) | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(take_a, b, a);
}
inline VecF vec_max(VecF a, VecF b) {
  const __mmask16 take_a =
      _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ) | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(take_a, b, a);
}

// The pair as two registers in order, one load or store each (Lanes: the struct deriving).
template <class Lanes>
struct PairOfSingles {
  static void load_pair(const std::uint16_t* p, VecF& lo, VecF& hi) {
    lo = Lanes::load(p);
    hi = Lanes::load(p + kLanes);
  }
  static void store_pair(std::uint16_t* p, VecF lo, VecF hi) {
    Lanes::store(p, lo);
    Lanes::store(p + kLanes, hi);
  }
};

struct HalfLanes : PairOfSingles<HalfLanes> {
  static VecF load(const std::uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(std::uint16_t* p, VecF x) {
    const __m256i h = _mm512_cvtps_ph(x, kRoundNearestEven);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), canonical_nan(h));
  }
};

struct Bf16Lanes : PairOfSingles<Bf16Lanes> {
  static VecF load(const std::uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static void store(std::uint16_t* p, VecF x) {
    const __m512i f = _mm512_castps_si512(x);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(f, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(f, _mm512_set1_epi32(0x7fff)), odd), 16);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(f, 16), _mm512_set1_epi32(0x40));
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __m512i bits = _mm512_mask_blend_epi32(nan, rounded, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(bits));
  }
};
#else  // AVX2
using VecF = __m256;
constexpr std::size_t kLanes = 8;

inline VecF vec_add(VecF a, VecF b) { return _mm256_add_ps(a, b); }
inline VecF vec_mul(VecF a, VecF b) { return _mm256_mul_ps(a, b); }
inline VecF vec_div(VecF a, VecF b) { return _mm256_div_ps(a, b); }
inline VecF vec_set(float x) { return _mm256_set1_ps(x); }
inline VecF vec_load(const float* p) { return _mm256_loadu_ps(p); }
inline VecF vec_min(VecF a, VecF b) {
  const __m256 take_a =
      _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  return _mm256_blendv_ps(b, a, take_a);
}
inline VecF vec_max(VecF a, VecF b) {
  const __m256 take_a =
      _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  return _mm256_blendv_ps(b, a, take_a);
}

// The 8 low halves of each 32-bit lane (each value < 2^16), in order.
inline __m128i pack_low_halves(__m256i lanes) {
  // 64-bit quarters: a0-3, a0-3, a4-7, a4-7; quarters 0 and 2 are elements 0..7.
  const __m256i packed = _mm256_packus_epi32(lanes, lanes);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

struct HalfLanes {
  static VecF load(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(std::uint16_t* p, VecF x) {
    const __m128i h = _mm256_cvtps_ph(x, kRoundNearestEven);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), canonical_nan(h));
  }
  static void load_pair(const std::uint16_t* p, VecF& lo, VecF& hi) {
    lo = load(p);
    hi = load(p + kLanes);
  }
  // The NaN fix-up only when one of the 16 is NaN (one compare finds a NaN on either side).
  static void store_pair(std::uint16_t* p, VecF lo, VecF hi) {
    __m256i h = _mm256_set_m128i(_mm256_cvtps_ph(hi, kRoundNearestEven),
                                 _mm256_cvtps_ph(lo, kRoundNearestEven));
    if (_mm256_movemask_ps(_mm256_cmp_ps(lo, hi, _CMP_UNORD_Q)) != 0) h = canonical_nan(h);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
  }
};

struct Bf16Lanes {
  static VecF load(const std::uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static void store(std::uint16_t* p, VecF x) {
    const __m256i bits = _mm256_srli_epi32(with_quiet_nans(x, rounded(x)), 16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), pack_low_halves(bits));
  }
  // 16 elements as two registers in an order of their own: the even elements in lo, the odd
  // ones in hi, each already in its 32-bit lane's top half, where store_pair takes it back.
  static void load_pair(const std::uint16_t* p, VecF& lo, VecF& hi) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    lo = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    hi = _mm256_castsi256_ps(_mm256_and_si256(h, _mm256_set1_epi32(-65536)));
  }
  // Rounds both, mends NaNs only when one of the 16 is NaN (one compare finds a NaN on either
  // side), and interleaves the top halves back: even from lo, odd from hi.
  static void store_pair(std::uint16_t* p, VecF lo, VecF hi) {
    __m256i even = rounded(lo);
    __m256i odd = rounded(hi);
    if (_mm256_movemask_ps(_mm256_cmp_ps(lo, hi, _CMP_UNORD_Q)) != 0) {
      even = with_quiet_nans(lo, even);
      odd = with_quiet_nans(hi, odd);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm256_blend_epi16(_mm256_srli_epi32(even, 16), odd, 0xaa));
  }

 private:
  // Each lane's f32 rounded to nearest even at bit 16: the bf16 bits in the top half (the
  // portable formula; wrong for NaN, which with_quiet_nans mends), the low half left over.
  static __m256i rounded(VecF x) {
    const __m256i f = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(f, 16), _mm256_set1_epi32(1));
    return _mm256_add_epi32(_mm256_add_epi32(f, _mm256_set1_epi32(0x7fff)), lsb);
  }
  // NaN lanes of x get its top half with the quiet bit set, as the portable code.
  static __m256i with_quiet_nans(VecF x, __m256i rounded_bits) {
    const __m256i quiet = _mm256_or_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x400000));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(rounded_bits, quiet, nan);
  }
};
#endif

}  // namespace

}  // namespace ringlet::core::lanes
