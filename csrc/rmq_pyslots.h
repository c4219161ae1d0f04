/*
 * rmq_pyslots.h - an object slot of a Python class with __slots__, written in place.
 *
 * A class with __slots__ keeps each slot as an object pointer at a fixed offset in the instance,
 * named by a member descriptor on the class. Knowing the offset, native code can replace one
 * slot's value (the appender's MappedFile.wrote_position, once per put) without the generic
 * attribute machinery. Only writable object members qualify; callers fall back to ordinary
 * attribute access otherwise.
 * Include after Python.h (Cython modules only).
 */
#ifndef RMQ_PYSLOTS_H
#define RMQ_PYSLOTS_H

#if PY_VERSION_HEX >= 0x030C0000
#define RMQ_T_OBJECT_EX Py_T_OBJECT_EX
#define RMQ_READONLY Py_READONLY
#else
#include "structmember.h"
#define RMQ_T_OBJECT_EX T_OBJECT_EX
#define RMQ_READONLY READONLY
#endif

/* the offset of a writable object slot (d: a member descriptor of cls), or -1 */
static Py_ssize_t rmq_member_offset(PyObject *d, PyObject *cls)
{
    PyMemberDef *m;
    if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type || !PyType_Check(cls)) return -1;
    m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != RMQ_T_OBJECT_EX || (m->flags & RMQ_READONLY)) return -1;
    if (m->offset < (Py_ssize_t)sizeof(PyObject)
            || m->offset + (Py_ssize_t)sizeof(PyObject *) > ((PyTypeObject *)cls)->tp_basicsize)
        return -1;
    return m->offset;
}

/* replace the value of the slot at off (as the member descriptor's __set__ does) */
static inline void rmq_slot_replace(PyObject *o, Py_ssize_t off, PyObject *v)
{
    PyObject **p = (PyObject **)((char *)o + off);
    PyObject *old = *p;
    Py_INCREF(v);
    *p = v;
    Py_XDECREF(old);
}

#endif /* RMQ_PYSLOTS_H */
