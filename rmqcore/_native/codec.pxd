# C kernels of the CommitLog record codec (csrc/rmq_codec.h); every function is plain C99 and may
# run without the GIL. Cython modules that walk records themselves can cimport these declarations.
from libc.stdint cimport int32_t, int64_t, uint32_t


cdef extern from "rmq_codec.h" nogil:
    int RMQ_ST_MSG
    int RMQ_ST_END
    int RMQ_ST_BLANK
    int RMQ_ST_TORN
    int RMQ_ST_BAD_MAGIC
    int RMQ_ST_BAD_SIZE
    int RMQ_ST_BAD_CRC
    int RMQ_BLANK_SIZE
    int RMQ_MIN_RECORD_SIZE
    int RMQ_MAX_PROPERTIES_LEN
    int RMQ_FLAG_BORNHOST_V6
    int RMQ_FLAG_STOREHOST_V6
    int RMQ_NCOLUMNS
    enum:  # rows of a decoded batch (layout.COLUMNS), the ones other kernels index by name
        RMQ_C_POSITION
        RMQ_C_SIZE
        RMQ_C_QUEUE_ID
        RMQ_C_QUEUE_OFFSET
        RMQ_C_SYS_FLAG
        RMQ_C_STORE_TIMESTAMP
        RMQ_C_TOPIC_POS
        RMQ_C_TOPIC_LEN

    ctypedef struct rmq_record:
        int64_t pos
        int64_t size
        int32_t magic
        int32_t body_crc
        int32_t queue_id
        int32_t flag
        int64_t queue_offset
        int64_t physical_offset
        int32_t sys_flag
        int32_t born_port
        int64_t born_timestamp
        int64_t born_host_pos
        int64_t store_timestamp
        int64_t store_host_pos
        int32_t born_addr_len
        int32_t store_addr_len
        int32_t store_port
        int32_t reconsume_times
        int64_t prepared_tx_offset
        int64_t body_pos
        int64_t body_len
        int64_t topic_pos
        int64_t topic_len
        int64_t props_pos
        int64_t props_len

    ctypedef struct rmq_msg:
        const unsigned char *topic
        const unsigned char *born_addr
        const unsigned char *store_addr
        const unsigned char *body
        const unsigned char *props
        int64_t topic_len
        int64_t body_len
        int64_t props_len
        int32_t born_addr_len
        int32_t store_addr_len
        int32_t queue_id
        int32_t flag
        int32_t sys_flag
        int32_t born_port
        int32_t store_port
        int32_t reconsume_times
        int64_t queue_offset
        int64_t physical_offset
        int64_t born_timestamp
        int64_t store_timestamp
        int64_t prepared_tx_offset
        int v2

    int64_t rmq_record_size(int64_t body_len, int64_t topic_len, int64_t props_len, int64_t sys_flag, int v2)
    uint32_t rmq_body_crc(const unsigned char *buf, size_t len)
    uint32_t rmq_pretouch(const unsigned char *buf, size_t len)
    void rmq_encode_record(unsigned char *dst, const rmq_msg *m, int64_t size, uint32_t body_crc)
    void rmq_encode_record_crc(unsigned char *dst, const rmq_msg *m, int64_t size)
    void rmq_encode_batch(unsigned char *dst, const rmq_msg *m, int64_t n, const unsigned char *const *bodies,
                          const int64_t *body_lens, const unsigned char *const *props,
                          const int64_t *props_lens, const int32_t *flags, const int64_t *sizes)
    void rmq_encode_blank(unsigned char *dst, int32_t remaining)
    int rmq_peek_record(const unsigned char *buf, int64_t pos, int64_t limit, int64_t *size)
    int rmq_check_record(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc,
                         int64_t *size, rmq_record *rec)
    int rmq_scan_records(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc,
                         int64_t max_records, int64_t *end_pos, int64_t *count, int64_t *last_store_ts)
    int rmq_decode_batch(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc, int64_t *out,
                         int64_t row_stride, int64_t col_stride, int64_t cap, int64_t *count,
                         int64_t *end_pos)


# The tuple decode_record returns, for a record rmq_check_record accepted in base (the GIL held).
cdef tuple record_tuple(const unsigned char *base, const rmq_record *r)
# A MessageExt for that record, built without running Python code, when cls is this module's
# MessageExt; None otherwise.
cdef object make_message(object cls, int64_t position, const unsigned char *base, const rmq_record *r)
# make_message in two steps: the allocation (which may run a collection, so Python code) first,
# then the fields (ints and bytes only), for callers that overlap the allocation with a memory load.
cdef object alloc_message(object cls)
cdef int fill_message(object obj, int64_t position, const unsigned char *base, const rmq_record *r) except -1
