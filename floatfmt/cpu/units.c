/* floatfmt CPU capture: single Intel matrix / vector instructions on given inputs.

   Compiled at capture time by floatfmt.cpu.capture with the system C compiler (cc -O1
   -shared -fPIC) and loaded with ctypes; nothing compiled ships with floatfmt.  Every
   function carries its own target attribute, so the file compiles on any x86-64 CPU and
   a function is only called where /proc/cpuinfo lists its flags.  Codes in, codes out:
   bf16 / fp16 as uint16, fp32 as float bit patterns, int8 / int32 as themselves. */

#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* Ask Linux for the AMX tile data state (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): 0 on
   success. */
int ff_amx_request(void) {
#ifdef __linux__
    return (int)syscall(SYS_arch_prctl, 0x1023, 18);
#else
    return -1;
#endif
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} ff_tilecfg;

static void ff_config(ff_tilecfg *t) {
    memset(t, 0, sizeof *t);
    t->palette = 1;
    for (int i = 0; i < 3; i++) {
        t->rows[i] = 16;
        t->colsb[i] = 64;
    }
}

/* n tiles: D (16x16 fp32) = C + A (16x32 bf16) . B, B given in the VNNI layout (16 rows of
   32 bf16: row r holds B[2r][j], B[2r+1][j] for j = 0..15). */
__attribute__((target("amx-tile,amx-bf16")))
void ff_tdpbf16ps(int n, const uint16_t *a, const uint16_t *bv, const float *c, float *d) {
    ff_tilecfg cfg;
    ff_config(&cfg);
    _tile_loadconfig(&cfg);
    for (int t = 0; t < n; t++) {
        _tile_loadd(0, c + 256 * t, 64);
        _tile_loadd(1, a + 512 * t, 64);
        _tile_loadd(2, bv + 512 * t, 64);
        _tile_dpbf16ps(0, 1, 2);
        _tile_stored(0, d + 256 * t, 64);
    }
    _tile_release();
}

/* n tiles: D (16x16 int32) = C + A (16x64 8-bit) . B, B in the VNNI layout (16 rows of 64
   bytes: row r holds B[4r..4r+3][j] for j = 0..15); kind 0 ssd, 1 sud, 2 usd, 3 uud. */
__attribute__((target("amx-tile,amx-int8")))
void ff_tdpb(int kind, int n, const uint8_t *a, const uint8_t *bv, const int32_t *c,
             int32_t *d) {
    ff_tilecfg cfg;
    ff_config(&cfg);
    _tile_loadconfig(&cfg);
    for (int t = 0; t < n; t++) {
        _tile_loadd(0, c + 256 * t, 64);
        _tile_loadd(1, a + 1024 * t, 64);
        _tile_loadd(2, bv + 1024 * t, 64);
        switch (kind) {
            case 0: _tile_dpbssd(0, 1, 2); break;
            case 1: _tile_dpbsud(0, 1, 2); break;
            case 2: _tile_dpbusd(0, 1, 2); break;
            default: _tile_dpbuud(0, 1, 2); break;
        }
        _tile_stored(0, d + 256 * t, 64);
    }
    _tile_release();
}

/* n lanes (a multiple of 16): d[i] = VDPBF16PS(c[i], a[2i..2i+1], b[2i..2i+1]). */
__attribute__((target("avx512f,avx512bf16")))
void ff_vdpbf16ps(int n, const uint16_t *a, const uint16_t *b, const float *c, float *d) {
    for (int i = 0; i < n; i += 16) {
        __m512 s = _mm512_loadu_ps(c + i);
        __m512i x = _mm512_loadu_si512((const void *)(a + 2 * i));
        __m512i y = _mm512_loadu_si512((const void *)(b + 2 * i));
        _mm512_storeu_ps(d + i, _mm512_dpbf16_ps(s, (__m512bh)x, (__m512bh)y));
    }
}

/* n values (a multiple of 16): y = VCVTNEPS2BF16(x). */
__attribute__((target("avx512f,avx512bf16")))
void ff_cvtneps2bf16(int n, const float *x, uint16_t *y) {
    for (int i = 0; i < n; i += 16) {
        __m256bh r = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
        _mm256_storeu_si256((__m256i *)(y + i), (__m256i)r);
    }
}

/* n values (a multiple of 32): AVX512-FP16 add, mul, div, sqrt (of a), fma (a * b + c). */
__attribute__((target("avx512f,avx512fp16")))
void ff_fp16_ops(int n, const uint16_t *a, const uint16_t *b, const uint16_t *c,
                 uint16_t *add, uint16_t *mul, uint16_t *div, uint16_t *sqrt_, uint16_t *fma) {
    for (int i = 0; i < n; i += 32) {
        __m512h x = _mm512_loadu_ph(a + i), y = _mm512_loadu_ph(b + i);
        __m512h z = _mm512_loadu_ph(c + i);
        _mm512_storeu_ph(add + i, _mm512_add_ph(x, y));
        _mm512_storeu_ph(mul + i, _mm512_mul_ph(x, y));
        _mm512_storeu_ph(div + i, _mm512_div_ph(x, y));
        _mm512_storeu_ph(sqrt_ + i, _mm512_sqrt_ph(x));
        _mm512_storeu_ph(fma + i, _mm512_fmadd_ph(x, y, z));
    }
}
