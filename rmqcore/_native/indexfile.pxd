# IndexFile kernels (csrc/rmq_index.h): plain C99, safe without the GIL. indexfile.pyx wraps them;
# other Cython modules that walk index files (keylookup, dispatch) cimport these declarations.
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t


cdef extern from "rmq_index.h" nogil:
    enum:
        RMQ_INDEX_HEADER_SIZE
        RMQ_INDEX_SLOT_SIZE
        RMQ_INDEX_ENTRY_SIZE
        RMQ_INDEX_OK
        RMQ_INDEX_E_SHORT
        RMQ_INDEX_E_COUNT
    ctypedef struct rmq_index_header:
        int64_t begin_timestamp
        int64_t end_timestamp
        int64_t begin_phy_offset
        int64_t end_phy_offset
        int32_t hash_slot_count
        int32_t index_count
    ctypedef struct rmq_index_walk:
        int32_t next
        int32_t index_count
        int64_t begin_ts
        uint64_t steps_left
        uint64_t results_left
    uint64_t rmq_index_file_size(uint32_t slots, uint32_t entries)
    void rmq_index_read_header(const unsigned char *buf, rmq_index_header *h)
    int rmq_index_check(const unsigned char *buf, size_t len, uint32_t slots, uint32_t entries)
    int rmq_index_put(unsigned char *buf, uint32_t slots, uint32_t entries, int32_t key_hash,
                      int64_t phy_offset, int64_t store_timestamp)
    size_t rmq_index_put_batch(unsigned char *buf, uint32_t slots, uint32_t entries, const void *key_hashes,
                               const void *phy_offsets, const void *store_timestamps, size_t n)
    void rmq_index_walk_start(const unsigned char *buf, uint32_t slots, int32_t key_hash, uint64_t max_num,
                              uint64_t max_steps, rmq_index_walk *w)
    size_t rmq_index_walk_run(const unsigned char *buf, uint32_t slots, uint32_t entries, int32_t key_hash,
                              int64_t begin, int64_t end, rmq_index_walk *w, int64_t *out, size_t cap)
