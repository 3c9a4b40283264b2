#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include "CSystem.h"

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of etcd's WAL and of
// iSCSI/ext4. The storage log frames every record with it.

static uint32_t crc32c_table[8][256];
static pthread_once_t crc32c_table_once = PTHREAD_ONCE_INIT;

static void crc32c_build_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
        crc32c_table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = crc32c_table[0][n];
        for (int k = 1; k < 8; k++) {
            crc = crc32c_table[0][crc & 0xFF] ^ (crc >> 8);
            crc32c_table[k][n] = crc;
        }
    }
}

uint32_t csystem_crc32c_portable(uint32_t crc, const void *data, size_t length) {
    pthread_once(&crc32c_table_once, crc32c_build_table);
    const unsigned char *p = data;
    crc = ~crc;
    // Slicing-by-8: eight table lookups per 8 bytes instead of one per byte.
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        word ^= crc;
        crc = crc32c_table[7][word & 0xFF] ^ crc32c_table[6][(word >> 8) & 0xFF] ^
              crc32c_table[5][(word >> 16) & 0xFF] ^ crc32c_table[4][(word >> 24) & 0xFF] ^
              crc32c_table[3][(word >> 32) & 0xFF] ^ crc32c_table[2][(word >> 40) & 0xFF] ^
              crc32c_table[1][(word >> 48) & 0xFF] ^ crc32c_table[0][word >> 56];
        p += 8;
        length -= 8;
    }
    while (length--) crc = crc32c_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

// The crc32 instruction takes 3 cycles but can start one every cycle: three independent
// streams over three adjacent blocks keep it busy (recovery checksums every byte of the log),
// then the blocks' results are joined. CRC is linear: the state after A then B equals the
// state after A advanced over |B| zero bytes, xor the state of B alone from zero.
#define CRC32C_BLOCK 128

// crc32c_shift[k][b]: byte k of a state equal to b, advanced over CRC32C_BLOCK zero bytes.
static uint32_t crc32c_shift[4][256];
static pthread_once_t crc32c_shift_once = PTHREAD_ONCE_INIT;

__attribute__((target("sse4.2")))
static void crc32c_build_shift(void) {
    for (int k = 0; k < 4; k++) {
        for (uint32_t b = 0; b < 256; b++) {
            uint64_t c = (uint64_t)(b << (8 * k));
            for (int i = 0; i < CRC32C_BLOCK / 8; i++) c = _mm_crc32_u64(c, 0);
            crc32c_shift[k][b] = (uint32_t)c;
        }
    }
}

static inline uint32_t crc32c_shift_block(uint32_t c) {
    return crc32c_shift[0][c & 0xFF] ^ crc32c_shift[1][(c >> 8) & 0xFF] ^
           crc32c_shift[2][(c >> 16) & 0xFF] ^ crc32c_shift[3][c >> 24];
}

__attribute__((target("sse4.2")))
static uint32_t crc32c_sse42(uint32_t crc, const void *data, size_t length) {
    const unsigned char *p = data;
    uint64_t c = ~crc;
    if (length >= 3 * CRC32C_BLOCK) {
        pthread_once(&crc32c_shift_once, crc32c_build_shift);
        do {
            uint64_t c1 = 0, c2 = 0;
            for (int i = 0; i < CRC32C_BLOCK; i += 8) {
                uint64_t w0, w1, w2;
                memcpy(&w0, p + i, 8);
                memcpy(&w1, p + CRC32C_BLOCK + i, 8);
                memcpy(&w2, p + 2 * CRC32C_BLOCK + i, 8);
                c = _mm_crc32_u64(c, w0);
                c1 = _mm_crc32_u64(c1, w1);
                c2 = _mm_crc32_u64(c2, w2);
            }
            c = crc32c_shift_block((uint32_t)c) ^ (uint32_t)c1;
            c = crc32c_shift_block((uint32_t)c) ^ (uint32_t)c2;
            p += 3 * CRC32C_BLOCK;
            length -= 3 * CRC32C_BLOCK;
        } while (length >= 3 * CRC32C_BLOCK);
    }
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        length -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (length--) c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}

int csystem_crc32c_hardware(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
}

uint32_t csystem_crc32c(uint32_t crc, const void *data, size_t length) {
    // The CPU check is a load of a flag the runtime filled at start; no per-call cpuid.
    static int hardware = -1;
    int use = __atomic_load_n(&hardware, __ATOMIC_RELAXED);
    if (use < 0) {
        use = csystem_crc32c_hardware();
        __atomic_store_n(&hardware, use, __ATOMIC_RELAXED);
    }
    return use ? crc32c_sse42(crc, data, length) : csystem_crc32c_portable(crc, data, length);
}
#else
int csystem_crc32c_hardware(void) { return 0; }

uint32_t csystem_crc32c(uint32_t crc, const void *data, size_t length) {
    return csystem_crc32c_portable(crc, data, length);
}
#endif
