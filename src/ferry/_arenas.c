/* Python's freed arenas kept mapped for reuse (ferry._arenas; see ferry/arenas.py).
 *
 * Python's small-object allocator (pymalloc) takes memory from the system in arenas of 1 MiB and
 * hands an arena back (munmap) as soon as the last object in it is freed. A pipeline buffers a
 * checkpoint's rows (hundreds of MiB of dicts, strings and tuples) and frees them all at once when
 * the checkpoint has written them: every arena goes back to the system, and the next checkpoint's
 * rows fault every page of new arenas in again, zeroed by the kernel. This module installs an arena
 * allocator (PyObject_SetArenaAllocator, CPython's C API for it) that keeps freed arenas, up to a
 * limit, and hands them out again. A kept arena is marked MADV_FREE: the kernel may take its pages
 * back when memory runs short (they then read as zeros, which pymalloc does not depend on),
 * and otherwise they are reused as they are, without a page fault.
 *
 * Written here because no library does it: the hook is C only. A kept block is handed out again
 * only for a request of its own size (the interpreter's frame stacks come from the same hook, in
 * other sizes); a request no kept block fits, and every block beyond the limit, go to the
 * allocator that was in place before. The hooks run under the GIL, as pymalloc does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sys/mman.h>

typedef struct {
    void *address;
    size_t size;
} Block;

static PyObjectArenaAllocator before; /* the allocator this one was put in front of */
static Block *kept;                   /* freed blocks, the last freed on top */
static size_t kept_count;
static size_t kept_limit;
static size_t kept_capacity;
static int installed;

static void *
arena_alloc(void *ctx, size_t size)
{
    (void)ctx;
    for (size_t i = kept_count; i > 0; i--) {
        if (kept[i - 1].size == size) {
            void *address = kept[i - 1].address;
            kept[i - 1] = kept[--kept_count];
            return address;
        }
    }
    return before.alloc(before.ctx, size);
}

static void
arena_free(void *ctx, void *address, size_t size)
{
    (void)ctx;
    if (kept_count < kept_limit) { /* keep() grows the array to the limit first */
        madvise(address, size, MADV_FREE); /* a kernel without MADV_FREE: the pages stay as they are */
        kept[kept_count].address = address;
        kept[kept_count].size = size;
        kept_count++;
        return;
    }
    before.free(before.ctx, address, size);
}

static PyObject *
keep(PyObject *module, PyObject *arg)
{
    (void)module;
    Py_ssize_t limit = PyLong_AsSsize_t(arg);
    if (limit == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (limit < 0) {
        PyErr_SetString(PyExc_ValueError, "the number of arenas kept cannot be negative");
        return NULL;
    }
    if ((size_t)limit > kept_capacity) {
        Block *grown = PyMem_RawRealloc(kept, (size_t)limit * sizeof(Block));
        if (grown == NULL) {
            return PyErr_NoMemory();
        }
        kept = grown;
        kept_capacity = (size_t)limit;
    }
    while (kept_count > (size_t)limit) { /* a lower limit: the blocks beyond it go back now */
        kept_count--;
        before.free(before.ctx, kept[kept_count].address, kept[kept_count].size);
    }
    kept_limit = (size_t)limit;
    if (!installed) {
        PyObject_GetArenaAllocator(&before);
        PyObjectArenaAllocator mine = {NULL, arena_alloc, arena_free};
        PyObject_SetArenaAllocator(&mine);
        installed = 1;
    }
    Py_RETURN_NONE;
}

static PyObject *
kept_arenas(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromSize_t(kept_count);
}

static PyMethodDef methods[] = {
    {"keep", keep, METH_O,
     "keep(limit): keep up to limit freed arenas for reuse (installs the allocator the first time)."},
    {"kept", kept_arenas, METH_NOARGS, "kept(): the freed arenas kept now."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ferry._arenas", "Python's freed arenas kept mapped for reuse.", -1, methods,
};

PyMODINIT_FUNC
PyInit__arenas(void)
{
    return PyModule_Create(&module);
}
