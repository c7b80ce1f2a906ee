/* The writers' rows as PostgreSQL's binary COPY stream, in C.
 *
 * asyncpg's copy_records_to_table encodes each value through its codec machinery: ~7 us of CPU per
 * port_counters row (30 columns) on this machine, the largest share of the collector's COPY time.
 * encode() builds the whole "COPY ... FROM STDIN (FORMAT binary)" stream of a batch in one pass
 * for the column types a writer's tables use, or hands the batch back (None) when any value is not
 * what asyncpg would send unchanged: the caller then uses asyncpg's encoder, which raises its own
 * clear errors: asyncpg's encoder is the reference, there is no Python twin. store/copy_binary.py
 * reads the column kinds from the catalog; tests/unit/test_copy_binary.py reads the stream back
 * with a reader written from PostgreSQL's documented format, and tests/integration that
 * PostgreSQL stores the same rows either way. Built by hatch_build.py at install.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int
grow(Buf *b, Py_ssize_t need)
{
    if (b->len + need <= b->cap) {
        return 0;
    }
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need) {
        cap *= 2;
    }
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static void
put16(Buf *b, uint16_t v)
{
    unsigned char *p = (unsigned char *)b->data + b->len;
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
    b->len += 2;
}

static void
put32(Buf *b, uint32_t v)
{
    unsigned char *p = (unsigned char *)b->data + b->len;
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
    b->len += 4;
}

static void
put64(Buf *b, uint64_t v)
{
    put32(b, (uint32_t)(v >> 32));
    put32(b, (uint32_t)v);
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant's algorithm). */
static int64_t
days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

#define PG_EPOCH_DAYS 10957 /* 2000-01-01, PostgreSQL's epoch, in days from 1970-01-01 */

/* One value of kind k: 1 written, 0 not a value this encoder takes (hand the batch back), -1 error. */
static int
put_value(Buf *b, char k, PyObject *v)
{
    if (v == Py_None) {
        if (grow(b, 4)) {
            return -1;
        }
        put32(b, 0xFFFFFFFFu);
        return 1;
    }
    switch (k) {
    case 'T': { /* timestamptz from an aware datetime in UTC (datetime.UTC itself) */
        if (!PyDateTime_CheckExact(v)) {
            return 0;
        }
        PyObject *tz = PyDateTime_DATE_GET_TZINFO(v);
        if (tz != PyDateTime_TimeZone_UTC) {
            return 0;
        }
        int64_t days = days_from_civil(PyDateTime_GET_YEAR(v), (unsigned)PyDateTime_GET_MONTH(v),
                                       (unsigned)PyDateTime_GET_DAY(v)) - PG_EPOCH_DAYS;
        int64_t us = ((days * 24 + PyDateTime_DATE_GET_HOUR(v)) * 60 + PyDateTime_DATE_GET_MINUTE(v)) * 60
                     + PyDateTime_DATE_GET_SECOND(v);
        us = us * 1000000 + PyDateTime_DATE_GET_MICROSECOND(v);
        if (grow(b, 12)) {
            return -1;
        }
        put32(b, 8);
        put64(b, (uint64_t)us);
        return 1;
    }
    case 's': { /* text */
        if (!PyUnicode_CheckExact(v)) {
            return 0;
        }
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(v, &n);
        if (s == NULL) {
            PyErr_Clear(); /* lone surrogates: asyncpg says what is wrong */
            return 0;
        }
        if (n > 0x7FFFFFFF || grow(b, 4 + n)) {
            return n > 0x7FFFFFFF ? 0 : -1;
        }
        put32(b, (uint32_t)n);
        memcpy(b->data + b->len, s, (size_t)n);
        b->len += n;
        return 1;
    }
    case 'h':
    case 'i':
    case 'q': { /* int2, int4, int8 from an int (a bool is an int, as asyncpg takes it) */
        if (!PyLong_Check(v)) {
            return 0;
        }
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (overflow || (k == 'h' && (x < INT16_MIN || x > INT16_MAX))
            || (k == 'i' && (x < INT32_MIN || x > INT32_MAX))) {
            return 0;
        }
        if (grow(b, 12)) {
            return -1;
        }
        if (k == 'h') {
            put32(b, 2);
            put16(b, (uint16_t)(int16_t)x);
        } else if (k == 'i') {
            put32(b, 4);
            put32(b, (uint32_t)(int32_t)x);
        } else {
            put32(b, 8);
            put64(b, (uint64_t)x);
        }
        return 1;
    }
    case 'f':
    case 'd': { /* float4, float8 from a float or an int */
        double x;
        if (PyFloat_CheckExact(v)) {
            x = PyFloat_AS_DOUBLE(v);
        } else if (PyLong_CheckExact(v)) {
            x = PyLong_AsDouble(v);
            if (x == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
        } else {
            return 0;
        }
        if (grow(b, 12)) {
            return -1;
        }
        if (k == 'f') {
            float f = (float)x;
            if (isinf(f) && !isinf(x)) {
                return 0; /* out of float4's range: asyncpg raises */
            }
            uint32_t bits;
            memcpy(&bits, &f, 4);
            put32(b, 4);
            put32(b, bits);
        } else {
            uint64_t bits;
            memcpy(&bits, &x, 8);
            put32(b, 8);
            put64(b, bits);
        }
        return 1;
    }
    case 'Q': { /* int8[]: a one-dimensional list or tuple of ints, none NULL (else handed back) */
        if (!PyList_CheckExact(v) && !PyTuple_CheckExact(v)) {
            return 0;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
        if (n < 1 || n > 1000000) { /* an empty array has no dimension: asyncpg writes that one */
            return 0;
        }
        if (grow(b, 24 + 12 * n)) {
            return -1;
        }
        Py_ssize_t start = b->len;
        put32(b, (uint32_t)(20 + 12 * n)); /* the field's length */
        put32(b, 1);                        /* ndim */
        put32(b, 0);                        /* flags: no NULL element */
        put32(b, 20);                       /* element type: int8's OID */
        put32(b, (uint32_t)n);              /* the dimension's length ... */
        put32(b, 1);                        /* ... and lower bound */
        PyObject **items = PySequence_Fast_ITEMS(v);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *x = items[i];
            if (!PyLong_Check(x)) {
                b->len = start;
                return 0;
            }
            int overflow;
            long long e = PyLong_AsLongLongAndOverflow(x, &overflow);
            if (e == -1 && PyErr_Occurred()) {
                return -1;
            }
            if (overflow) {
                b->len = start;
                return 0;
            }
            put32(b, 8);
            put64(b, (uint64_t)e);
        }
        return 1;
    }
    case '?': /* bool */
        if (!PyBool_Check(v)) {
            return 0;
        }
        if (grow(b, 5)) {
            return -1;
        }
        put32(b, 1);
        b->data[b->len++] = v == Py_True ? 1 : 0;
        return 1;
    default:
        return 0;
    }
}

static const char SIGNATURE[11] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', '\xff', '\r', '\n', '\0'};

PyDoc_STRVAR(encode_doc,
"encode(rows, kinds) -> bytes | None\n\n"
"The binary COPY stream (header, one tuple per row, trailer) of ``rows``, tuples whose values\n"
"match ``kinds``, one character per column: T timestamptz (datetime in datetime.UTC), s text,\n"
"h int2, i int4, q int8, f float4, d float8, ? bool, Q int8[] (a list or tuple of ints);\n"
"None is NULL. None when a row is not a\n"
"tuple of that length or a value is not of its column's kind or range: the caller encodes the\n"
"batch another way.");

static PyObject *
encode(PyObject *self, PyObject *args)
{
    PyObject *rows;
    const char *kinds;
    Py_ssize_t ncols;
    if (!PyArg_ParseTuple(args, "Os#:encode", &rows, &kinds, &ncols)) {
        return NULL;
    }
    if (ncols < 1 || ncols > 1600) {
        PyErr_SetString(PyExc_ValueError, "kinds must name 1 to 1600 columns");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(rows, "rows must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    Buf b = {NULL, 0, 0};
    PyObject *result = NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    if (grow(&b, 19)) {
        goto done;
    }
    memcpy(b.data, SIGNATURE, sizeof SIGNATURE);
    b.len = sizeof SIGNATURE;
    put32(&b, 0); /* flags */
    put32(&b, 0); /* header extension length */
    for (Py_ssize_t r = 0; r < count; r++) {
        PyObject *row = items[r];
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != ncols) {
            goto hand_back;
        }
        if (grow(&b, 2)) {
            goto done;
        }
        put16(&b, (uint16_t)ncols);
        for (Py_ssize_t c = 0; c < ncols; c++) {
            int ok = put_value(&b, kinds[c], PyTuple_GET_ITEM(row, c));
            if (ok < 0) {
                goto done;
            }
            if (ok == 0) {
                goto hand_back;
            }
        }
    }
    if (grow(&b, 2)) {
        goto done;
    }
    put16(&b, 0xFFFFu);
    result = PyBytes_FromStringAndSize(b.data, b.len);
    goto done;
hand_back:
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(b.data);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"encode", encode, METH_VARARGS, encode_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "store._copy_binary",
    .m_doc = "Rows as PostgreSQL's binary COPY stream, in C (see _copy_binary.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__copy_binary(void)
{
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    /* store/copy_binary.py ABI: raised with any change of encode's arguments or results */
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
