"""The C core: csrc/*.c built once, into this module only, with hidden visibility.

The kernel modules call the C functions through the table this module publishes as the capsule
``_C_API`` (csrc/rmq_capi.h), so the process holds one copy of the C core and of its state: the CRC
kernels chosen for this CPU and their testing override (``crc._force_level``) are the same for every
kernel module. Not a kernel (it has no pure twin); every kernel module that calls C imports it.
"""
from cpython.pycapsule cimport PyCapsule_New

cdef extern from "rmq_crc32.h":
    const char *rmq_crc32_impl_name()
    const char *rmq_crc32c_impl_name()

__all__ = ["crc_kernels"]

_C_API = PyCapsule_New(<void *>rmq_capi_table(), RMQ_CAPI_CAPSULE, NULL)


def crc_kernels():
    """The CRC kernels every kernel module uses now, for (CRC-32, CRC-32C)."""
    return (rmq_crc32_impl_name().decode("ascii"), rmq_crc32c_impl_name().decode("ascii"))
