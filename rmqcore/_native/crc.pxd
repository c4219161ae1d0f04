# C kernels of CRC-32 / CRC-32C (csrc/rmq_crc32.h); plain C, callable without the GIL. crc.pyx
# wraps them for Python; Cython modules that check CRCs inside their own walks cimport them from here.
from libc.stdint cimport uint32_t


cdef extern from "rmq_crc32.h" nogil:
    uint32_t rmq_crc32(uint32_t crc, const unsigned char *buf, size_t len)
    uint32_t rmq_crc32c(uint32_t crc, const unsigned char *buf, size_t len)
    const char *rmq_crc32_impl_name()
    const char *rmq_crc32c_impl_name()
    void rmq_crc_force_portable(int on)
    void rmq_crc_force_level(int level)
