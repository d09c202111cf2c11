/* Table-driven CRCs for kernel.c (included once, from there only).
 *
 * CRC-32: reflected poly 0xEDB88320 (zlib parameters), slice-by-8. It serves CPUs without
 * carry-less multiply, and the tails of the vector code (crc_simd.h).
 * CRC-16 (VCRC): reflected poly 0xD008 (0x100B), slice-by-8.
 */
#include <string.h>

static uint32_t crc32_tab[8][256];
static uint16_t crc16_tab[8][256];

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static void crc_tables_init(void)
{
    for (unsigned i = 0; i < 256; i++) {
        uint32_t c = i;
        uint16_t h = (uint16_t)i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
            h = (h & 1) ? (uint16_t)((h >> 1) ^ 0xD008u) : (uint16_t)(h >> 1);
        }
        crc32_tab[0][i] = c;
        crc16_tab[0][i] = h;
    }
    for (unsigned i = 0; i < 256; i++) {
        for (int k = 1; k < 8; k++) {
            uint32_t c = crc32_tab[k - 1][i];
            uint16_t h = crc16_tab[k - 1][i];
            crc32_tab[k][i] = (c >> 8) ^ crc32_tab[0][c & 0xFF];
            crc16_tab[k][i] = (uint16_t)((h >> 8) ^ crc16_tab[0][h & 0xFF]);
        }
    }
}

/* Register in, register out (no pre/post inversion). */
static uint32_t crc32_sb8(uint32_t c, const uint8_t *p, size_t n)
{
    while (n >= 8) {
        uint64_t w = load_le64(p) ^ c;
        c = crc32_tab[7][w & 0xFF] ^ crc32_tab[6][(w >> 8) & 0xFF] ^
            crc32_tab[5][(w >> 16) & 0xFF] ^ crc32_tab[4][(w >> 24) & 0xFF] ^
            crc32_tab[3][(w >> 32) & 0xFF] ^ crc32_tab[2][(w >> 40) & 0xFF] ^
            crc32_tab[1][(w >> 48) & 0xFF] ^ crc32_tab[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ crc32_tab[0][(c ^ *p++) & 0xFF];
    return c;
}

static uint16_t crc16_sb8(uint16_t c, const uint8_t *p, size_t n)
{
    while (n >= 8) {
        uint64_t w = load_le64(p) ^ c;
        c = (uint16_t)(crc16_tab[7][w & 0xFF] ^ crc16_tab[6][(w >> 8) & 0xFF] ^
                       crc16_tab[5][(w >> 16) & 0xFF] ^ crc16_tab[4][(w >> 24) & 0xFF] ^
                       crc16_tab[3][(w >> 32) & 0xFF] ^ crc16_tab[2][(w >> 40) & 0xFF] ^
                       crc16_tab[1][(w >> 48) & 0xFF] ^ crc16_tab[0][w >> 56]);
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (uint16_t)((c >> 8) ^ crc16_tab[0][(c ^ *p++) & 0xFF]);
    return c;
}

/* lead_register[pseudo_lrh][k]: the CRC register that k zero bytes turn into the register at
 * the start of the ICRC region (init 0xFFFFFFFF, then 8 x 0xFF for a pseudo LRH). */
static uint32_t lead_register[2][64];

/* Runs one zero byte backwards: the register r with (r >> 8) ^ T[r & 0xFF] == next. */
static uint32_t crc32_unshift_zero(uint32_t next, const uint8_t inverse_top[256])
{
    uint8_t low = inverse_top[next >> 24];
    return (next ^ crc32_tab[0][low]) << 8 | low;
}

static void lead_registers_init(void)
{
    static const uint8_t ff8[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    uint8_t inverse_top[256];
    for (unsigned i = 0; i < 256; i++)
        inverse_top[crc32_tab[0][i] >> 24] = (uint8_t)i; /* the top bytes are all distinct */
    lead_register[0][0] = 0xFFFFFFFFu;
    lead_register[1][0] = crc32_sb8(0xFFFFFFFFu, ff8, 8);
    for (int ps = 0; ps < 2; ps++)
        for (int k = 1; k < 64; k++)
            lead_register[ps][k] = crc32_unshift_zero(lead_register[ps][k - 1], inverse_top);
}
