/* ibwire pcap layer: read-only maps of capture files that survive the file shrinking.
 *
 * Reading a page of a shared file map past the file's end raises SIGBUS (mmap(2), "SIGBUS:
 * attempted access to a page of the buffer that lies beyond the end of the mapped file"),
 * which kills the process: a capture truncated by log rotation, or by another process, while
 * ibwire reads it. Each map ibwire makes of a capture is registered here; while one is, a
 * SIGBUS handler is installed that, for a fault inside a registered map, puts an anonymous
 * zero page over the faulting page (mmap MAP_FIXED, so the read goes on and sees zeros) and
 * marks the map as faulted; the reader then checks the mark and reports the file as shrunk.
 * Any other SIGBUS goes to the handler that was there before (or the default action, which
 * ends the process as it would have without ibwire). The handler is installed when the first
 * map is registered and the previous one restored when the last is released, unless someone
 * else replaced ours meanwhile.
 *
 * Register and release are called with the GIL held (never concurrently); the handler may
 * run in any thread, concurrently with them.
 */
#ifndef IBWIRE_FILEMAP_H
#define IBWIRE_FILEMAP_H

#include <stdint.h>

#define IBW_MAP_SLOTS 1024

/* Register [start, end) as a capture map: its slot, or -1 (no slot free, or the handler could
 * not be installed: errno says why). */
int ibw_map_register(uintptr_t start, uintptr_t end);

/* Whether a fault was caught in the slot's map so far. */
int ibw_map_faulted(int slot);

/* Unregister a slot (before its map is unmapped); returns whether it faulted. */
int ibw_map_release(int slot);

/* Faults caught in any map since the process started (tests). */
int64_t ibw_map_faults(void);

#endif /* IBWIRE_FILEMAP_H */
