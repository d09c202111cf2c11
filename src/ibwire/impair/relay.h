#ifndef IBWIRE_IMPAIR_RELAY_H
#define IBWIRE_IMPAIR_RELAY_H
#include <sched.h>
#include <stdint.h>

static inline void sched_yield_wrapper(void) { sched_yield(); }

int relay_receive(int fd, uint8_t *buffer, int64_t slot, int most, int64_t *offsets,
                  int64_t *lengths, int64_t *stamps, uint8_t *csum);
int relay_send(int fd, const uint8_t *buffer, const int64_t *offsets, const int64_t *lengths,
               int count, int *failed);
int64_t relay_pack_records(const uint8_t *buffer, const int64_t *offsets,
                           const int64_t *lengths, const int64_t *stamps, int count,
                           uint8_t *out);
void relay_classify(const uint8_t *buffer, const int64_t *offsets, const int64_t *lengths,
                    int count, uint8_t *ib, int32_t *network, int32_t *bth, int32_t *icrc,
                    uint8_t *opcode, uint32_t *destqp, uint32_t *psn, uint8_t *syndrome,
                    uint32_t *msn);
#endif
