// Packing helpers called by generated loop nests and by compile-time weight pre-packing.
#pragma once

#include <cstdint>

extern "C" {

/// Packs a rows x cols block of A into mr-row panels for the microkernel's transposed-A access:
/// panel p holds rows [p*mr, p*mr+mr); element (i, k) of the panel at dst[p*mr*cols + k*mr + i].
/// Rows past `rows` are zero. Source element (i, k) is a[i*lda + k], or a[k*lda + i] if transposed.
void tunec_pack_a_f32(const float* a, int64_t lda, int32_t transposed, int64_t rows, int64_t cols,
                      int64_t mr, float* dst);

/// Packs a k x n block of B into nr-column panels: panel p holds columns [p*nr, p*nr+nr) as
/// dst[p*k*nr + kk*nr + j], zero-padded past n. Source element (kk, j) is b[kk*ldb + j], or
/// b[j*ldb + kk] if transposed.
void tunec_pack_b_f32(const float* b, int64_t ldb, int32_t transposed, int64_t k, int64_t n,
                      int64_t nr, float* dst);

/// Packs a k x n block of bf16 B into nr-column panels of k-pairs (the layout vdpbf16ps reads):
/// element (kk, j) of panel p at dst[p*kp*nr + (kk/2)*2*nr + 2*j + kk%2], kp = k rounded up to
/// even; zero past n and past k. Source element (kk, j) is b[kk*ldb + j], or b[j*ldb + kk] if
/// transposed.
void tunec_pack_b_bf16(const uint16_t* b, int64_t ldb, int32_t transposed, int64_t k, int64_t n,
                       int64_t nr, uint16_t* dst);
/// As tunec_pack_b_bf16 from f32 B, each element rounded to the nearest even bf16 (weights
/// packed at compile time).
void tunec_pack_b_f32_to_bf16(const float* b, int64_t ldb, int32_t transposed, int64_t k, int64_t n,
                              int64_t nr, uint16_t* dst);
/// As tunec_pack_b_f32_to_bf16, each panel in a slot of kPad / 2 pair rows (kPad even, at least
/// k): panel p at dst[p*kPad*nr], its rows past k zero. AMX's B tiles read 16 pair rows a k
/// step, so kPad is k rounded up to 32 there (attention's K and V, packed per head at run time,
/// and a matmul's constant B).
void tunec_pack_b_f32_to_bf16_slots(const float* b, int64_t ldb, int32_t transposed, int64_t k,
                                    int64_t n, int64_t nr, int64_t kPad, uint16_t* dst);
/// As tunec_pack_b_bf16 into the slots of tunec_pack_b_f32_to_bf16_slots (a computed bf16 B of
/// an AMX matmul, packed per call).
void tunec_pack_b_bf16_slots(const uint16_t* b, int64_t ldb, int32_t transposed, int64_t k,
                             int64_t n, int64_t nr, int64_t kPad, uint16_t* dst);

/// Copies a rows x cols block of A (bf16, or f32 rounded to the nearest even bf16) into AMX
/// tiles: for each block of 16 rows and each k step of 32, one 16 x 32 bf16 tile of 1 KiB
/// (row r at 64 r bytes), k padded with zeros to kPad (a multiple of 32). Tile (q, s) starts at
/// (q * kPad / 32 + s) * 512 elements, so rows i.. of a 16-row block start at i * kPad. The
/// rows after the last, up to a multiple of 16, are zeros (dst holds rows rounded up to 16).
void tunec_pack_a_bf16_tiles(const void* a, int32_t srcIsBf16, int64_t lda, int32_t transposed,
                             int64_t rows, int64_t cols, int64_t kPad, uint16_t* dst);
/// The same tiles of u8 A (the int8 GEMM, tdpbusd): for each block of 16 rows and each k step
/// of 64, one 16 x 64 byte tile; tile (q, s) starts at (q * kPad / 64 + s) * 1024 bytes, so rows
/// i.. of a 16-row block start at i * kPad. k is padded with zeros to kPad (a multiple of 64) and
/// the rows after the last, up to a multiple of 16, are zeros.
void tunec_pack_a_u8_tiles(const uint8_t* a, int64_t lda, int64_t rows, int64_t cols, int64_t kPad,
                           uint8_t* dst);
/// Rounds a rows x cols block of f32 A to bf16 (nearest even) as rows of bf16 k-pairs: element
/// (i, k) at dst[i*cp + k], cp = cols rounded up to even, a zero after an odd row. Source element
/// (i, k) is a[i*lda + k], or a[k*lda + i] if transposed (the f32 activations of a GEMM with
/// bf16 weights, converted once per block).
void tunec_pack_a_f32_to_bf16(const float* a, int64_t lda, int32_t transposed, int64_t rows,
                              int64_t cols, uint16_t* dst);

/// An NHWC f32 tensor (pixels `srcLd` floats apart: a channel range of a wider tensor, or dense
/// when srcLd == c) rounded to bf16 into a zero-padded N x hp x wp x C copy, the source at
/// (pt, pl): the input of a bf16 convolution (--precision bf16). Each image's padded rows are in
/// `phases` planes: row y in plane y % phases at row y / phases of it, each plane
/// ceil(hp / phases) rows (a convolution of row stride `phases` on AMX then reads the rows of
/// consecutive output rows consecutively: conv2d_amx_kernel.cpp); one phase is the plain copy.
void tunec_pad_nhwc_f32_to_bf16(const float* src, int64_t srcLd, int64_t n, int64_t h, int64_t w,
                                int64_t c, int64_t pt, int64_t pl, int64_t hp, int64_t wp,
                                int64_t phases, uint16_t* dst);
/// The pixels (y * sh, x * sw) of an NHWC tensor (pixels `srcLd` elements apart) as a dense
/// N x ceil(h / sh) x ceil(w / sw) x C copy, rounded to bf16 or bytes as they are: the input of
/// a strided 1x1 convolution without padding, which reads no other pixel (conv2d_kernel.cpp).
void tunec_subsample_nhwc_f32_to_bf16(const float* src, int64_t srcLd, int64_t n, int64_t h,
                                      int64_t w, int64_t c, int64_t sh, int64_t sw, uint16_t* dst);
void tunec_subsample_nhwc_u8(const uint8_t* src, int64_t srcLd, int64_t n, int64_t h, int64_t w,
                             int64_t c, int64_t sh, int64_t sw, uint8_t* dst);
/// Copies an NHWC tensor into a zero-padded one of spatial size hp x wp, with the source placed
/// at (pt, pl).
void tunec_pad_nhwc_f32(const float* src, int64_t n, int64_t h, int64_t w, int64_t c, int64_t pt,
                        int64_t pl, int64_t hp, int64_t wp, float* dst);
/// As tunec_pad_nhwc_f32 for a u8 tensor, NHWC (pixels srcLd >= c bytes apart: a channel range
/// of a wider tensor, or dense) or (`nchw` nonzero) NCHW, into `cs` >= c channels per pixel: the
/// padding and the channels past c read `value` (an int8 convolution's input zero point: a
/// padded tap dequantizes to 0, and a channel past c has zero weights); the padded rows in
/// `phases` planes as tunec_pad_nhwc_f32_to_bf16's.
void tunec_pad_to_nhwc_u8(const uint8_t* src, int64_t nchw, int64_t n, int64_t h, int64_t w,
                          int64_t c, int64_t srcLd, int64_t cs, int64_t pt, int64_t pl, int64_t hp,
                          int64_t wp, int64_t value, int64_t phases, uint8_t* dst);
/// As tunec_pad_nhwc_f32 from an NCHW source: the reorder to NHWC and the padding in one pass
/// (a model's image input, read by its first convolution).
void tunec_pad_nchw_to_nhwc_f32(const float* src, int64_t n, int64_t h, int64_t w, int64_t c,
                                int64_t pt, int64_t pl, int64_t hp, int64_t wp, float* dst);
}
