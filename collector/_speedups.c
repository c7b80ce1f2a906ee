/* The collector's per-value path in C: the PROTO fast path of the gNMI decoder and of its
 * link-health decoder, and the counter deltas and the port_counters row of counter hygiene. Each
 * function does exactly what its Python twin does (collector/gnmi_decode.py StreamDecoder._fast,
 * collector/gnmi_optics.py _pairs, _slots and _note, collector/counters.py _deltas, and CounterTracker._rates with
 * _sample) on the inputs it takes, and hands anything else back
 * untouched (-1 / None) for the Python code to do: a Python
 * fallback always exists, and tests/unit/test_speedups.py checks the two agree on generated
 * inputs. Built by hatch_build.py at install; without a compiler fabricmon runs the Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* One varint filling p[0:n] exactly, at most 64 bits wide. 0: not that (the caller falls back). */
static int
read_varint(const unsigned char *p, Py_ssize_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n < 1 || n > 10) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char b = p[i];
        int last = (b & 0x80) == 0;
        if (last != (i == n - 1)) {
            return 0; /* ends early (fields after it) or runs past the value */
        }
        if (i == 9 && b > 1) {
            return 0; /* wider than 64 bits */
        }
        v |= (uint64_t)(b & 0x7F) << (7 * i);
    }
    *out = v;
    return 1;
}

PyDoc_STRVAR(fast_values_doc,
"fast_values(updates, slots, row) -> int\n\n"
"Store the uint values of one Notification's ``updates`` (serialized gNMI Updates) into ``row``\n"
"at ``slots[path bytes]``; the number stored. -1 when any update is not\n"
"Update{path (< 128 bytes), val{uint_val}}, a path is not in ``slots`` or its slot is not an\n"
"index of ``row``: the caller decodes that notification the careful way (values already stored\n"
"are the ones it stores again).");

static PyObject *
fast_values(PyObject *self, PyObject *args)
{
    PyObject *updates, *slots, *row;
    if (!PyArg_ParseTuple(args, "OO!O!:fast_values", &updates, &PyDict_Type, &slots, &PyList_Type, &row)) {
        return NULL;
    }
    /* A tuple of our own, never the caller's list: the dict lookup (a key's __eq__) and dropping
     * a row's old item (its __del__) can run Python that empties that list, and a pointer into
     * its items would then be freed memory (issue 28). A tuple holds every update for the call. */
    PyObject *seq = PySequence_Tuple(updates);
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(seq);
    long stored = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *u = PyTuple_GET_ITEM(seq, k);
        if (!PyBytes_Check(u)) {
            goto fallback;
        }
        const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(u);
        Py_ssize_t n = PyBytes_GET_SIZE(u);
        /* 0x0A len path | 0x1A len 0x18 varint: the layout the Python fast path accepts */
        if (n < 2 || b[0] != 0x0A || b[1] >= 0x80) {
            goto fallback;
        }
        Py_ssize_t j = (Py_ssize_t)b[1] + 2;
        if (j + 2 >= n || b[j] != 0x1A || (Py_ssize_t)b[j + 1] != n - j - 2 || b[j + 2] != 0x18) {
            goto fallback;
        }
        uint64_t value;
        if (!read_varint(b + j + 3, n - j - 3, &value)) {
            goto fallback;
        }
        PyObject *key = PyBytes_FromStringAndSize((const char *)b + 2, j - 2);
        if (key == NULL) {
            Py_DECREF(seq);
            return NULL;
        }
        PyObject *slot = PyDict_GetItemWithError(slots, key); /* borrowed */
        Py_DECREF(key);
        if (slot == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(seq);
                return NULL;
            }
            goto fallback;
        }
        if (!PyLong_CheckExact(slot)) {
            goto fallback; /* a leaf that is not a plain counter */
        }
        Py_ssize_t at = PyLong_AsSsize_t(slot);
        if (at < 0 || at >= PyList_GET_SIZE(row)) { /* re-read: dropping an item can run Python */
            PyErr_Clear();
            goto fallback;
        }
        PyObject *v = PyLong_FromUnsignedLongLong(value);
        if (v == NULL) {
            Py_DECREF(seq);
            return NULL;
        }
        PyList_SetItem(row, at, v); /* steals v, drops the old item */
        stored++;
    }
    Py_DECREF(seq);
    return PyLong_FromLong(stored);
fallback:
    Py_DECREF(seq);
    return PyLong_FromLong(-1);
}

/* One link-health update: Update{path (< 128 bytes), val{uint_val | double_val}}, the layout
 * collector/gnmi_optics.py _split and _fast_scalar accept, in b[0:n]. 1 with the path's bytes (b + 2, *path_n)
 * and the value (*is_double: *d, else *x) set; 0 for anything else (the caller hands it back). */
static int
plain_bytes(const unsigned char *b, Py_ssize_t n, const char **path, Py_ssize_t *path_n, int *is_double, uint64_t *x,
            double *d)
{
    /* 0x0A len path | 0x1A len value */
    if (n <= 4 || b[0] != 0x0A || b[1] >= 0x80) {
        return 0;
    }
    Py_ssize_t j = (Py_ssize_t)b[1] + 2;
    if (j + 2 > n || b[j] != 0x1A || (Py_ssize_t)b[j + 1] != n - j - 2) {
        return 0;
    }
    const unsigned char *v = b + j + 2;
    Py_ssize_t vn = n - j - 2;
    if (vn == 9 && v[0] == 0x71) { /* double_val (14), fixed64 little-endian */
        uint64_t bits = 0;
        for (int i = 8; i >= 1; i--) {
            bits = (bits << 8) | v[i];
        }
        memcpy(d, &bits, sizeof *d);
        *is_double = 1;
    }
    else if (vn > 1 && vn <= 11 && v[0] == 0x18) { /* uint_val (3), varint */
        if (!read_varint(v + 1, vn - 1, x)) {
            return 0;
        }
        *is_double = 0;
    }
    else {
        return 0;
    }
    *path = (const char *)b + 2;
    *path_n = j - 2;
    return 1;
}

/* plain_bytes, then the path's entry in ``dict``: 1 with *found a new reference, 0 when the update
 * is not plain or its path is not in ``dict`` (the caller hands the Notification back), -1 on error.
 * b[0:n] must stay alive for the call (the bytes of an object the caller holds). */
static int
plain_entry_bytes(const unsigned char *b, Py_ssize_t n, PyObject *dict, PyObject **found, int *is_double, uint64_t *x,
                  double *d)
{
    const char *path;
    Py_ssize_t path_n;
    if (!plain_bytes(b, n, &path, &path_n, is_double, x, d)) {
        return 0;
    }
    PyObject *key = PyBytes_FromStringAndSize(path, path_n);
    if (key == NULL) {
        return -1;
    }
    PyObject *entry = PyDict_GetItemWithError(dict, key); /* borrowed */
    Py_XINCREF(entry); /* ours: what the caller does next may run Python */
    Py_DECREF(key);
    if (entry == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    *found = entry;
    return 1;
}

/* plain_entry_bytes of an Update's bytes object (0 for anything that is not bytes). */
static int
plain_entry(PyObject *u, PyObject *dict, PyObject **found, int *is_double, uint64_t *x, double *d)
{
    if (!PyBytes_Check(u)) {
        return 0;
    }
    return plain_entry_bytes((const unsigned char *)PyBytes_AS_STRING(u), PyBytes_GET_SIZE(u), dict, found, is_double,
                             x, d);
}

PyDoc_STRVAR(optics_pairs_doc,
"optics_pairs(updates, acts) -> list | None\n\n"
"The (act, value) pairs of one link-health Notification's ``updates`` (serialized gNMI Updates):\n"
"``act`` is ``acts[path bytes]`` (pairs whose act is None are left out), ``value`` the int of a\n"
"``uint_val`` or the float of a ``double_val``. None when any update is not\n"
"Update{path (< 128 bytes), val{uint_val | double_val}}, or its path is not in ``acts``: the\n"
"caller decodes that notification the careful way (collector/gnmi_optics.py _pairs is the twin).");

static PyObject *
optics_pairs(PyObject *self, PyObject *args)
{
    PyObject *updates, *acts;
    if (!PyArg_ParseTuple(args, "OO!:optics_pairs", &updates, &PyDict_Type, &acts)) {
        return NULL;
    }
    /* a tuple of our own, as in fast_values: a key's __eq__ can run Python that changes the caller's list */
    PyObject *seq = PySequence_Tuple(updates);
    if (seq == NULL) {
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(seq);
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *act = NULL;
        int is_double = 0;
        uint64_t x = 0;
        double d = 0.0;
        int got = plain_entry(PyTuple_GET_ITEM(seq, k), acts, &act, &is_double, &x, &d);
        if (got <= 0) {
            if (got < 0) {
                goto error;
            }
            goto hand_back;
        }
        if (act == Py_None) { /* a leaf nothing here reads */
            Py_DECREF(act);
            continue;
        }
        PyObject *value = is_double ? PyFloat_FromDouble(d) : PyLong_FromUnsignedLongLong(x);
        if (value == NULL) {
            Py_DECREF(act);
            goto error;
        }
        PyObject *pair = PyTuple_Pack(2, act, value);
        Py_DECREF(act);
        Py_DECREF(value);
        if (pair == NULL || PyList_Append(out, pair) < 0) {
            Py_XDECREF(pair);
            goto error;
        }
        Py_DECREF(pair);
    }
    Py_DECREF(seq);
    return out;
hand_back:
    Py_DECREF(seq);
    Py_DECREF(out);
    Py_RETURN_NONE;
error:
    Py_DECREF(seq);
    Py_DECREF(out);
    return NULL;
}

/* optics_slots: what one code of a layout does with its slot (code = slot * 8 + op) */
enum { SLOT_SKIP = 0, SLOT_UINT = 1, SLOT_SET = 2, SLOT_MIN = 3, SLOT_MAX = 4 };
#define MAX_SLOTS 16

/* One planned Notification's slots as its updates fill them. */
typedef struct {
    Py_ssize_t slots;
    double low[MAX_SLOTS], high[MAX_SLOTS], dv[MAX_SLOTS];
    uint64_t uv[MAX_SLOTS];
    int kind[MAX_SLOTS]; /* 0: nothing yet, 1: uv, 2: dv */
} slot_state;

/* The slots of ``bounds`` (a tuple of (low, high) pairs), empty. 0, or -1 with an error set. */
static int
slots_begin(PyObject *bounds, slot_state *st, const char *who)
{
    st->slots = PyTuple_GET_SIZE(bounds);
    if (st->slots > MAX_SLOTS) {
        PyErr_Format(PyExc_ValueError, "%s: more than 16 slots", who);
        return -1;
    }
    for (Py_ssize_t i = 0; i < st->slots; i++) {
        PyObject *b = PyTuple_GET_ITEM(bounds, i);
        if (!PyTuple_Check(b) || PyTuple_GET_SIZE(b) != 2) {
            PyErr_Format(PyExc_TypeError, "%s: bounds are (low, high) pairs", who);
            return -1;
        }
        st->low[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(b, 0));
        st->high[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(b, 1));
        if (PyErr_Occurred()) {
            return -1;
        }
        st->kind[i] = 0;
    }
    return 0;
}

/* One update's bytes b[0:n] into its slot by ``layout``: 1 taken, 0 hand the Notification back (not
 * plain, not in the layout, not its op's type, out of bounds), -1 on error. */
static int
slots_take(slot_state *st, const unsigned char *b, Py_ssize_t n, PyObject *layout)
{
    PyObject *code = NULL;
    int is_double = 0;
    uint64_t x = 0;
    double d = 0.0;
    int got = plain_entry_bytes(b, n, layout, &code, &is_double, &x, &d);
    if (got <= 0) {
        return got;
    }
    long c = PyLong_CheckExact(code) ? PyLong_AsLong(code) : -1; /* an exact int runs no Python */
    Py_DECREF(code);
    if (c == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    long op = c & 7, slot = c >> 3;
    if (c < 0 || slot >= st->slots || op > SLOT_MAX) {
        return 0;
    }
    if (op == SLOT_SKIP) {
        return 1;
    }
    if (op == SLOT_UINT) {
        if (is_double) {
            return 0;
        }
        st->uv[slot] = x;
        st->kind[slot] = 1;
        return 1;
    }
    if (!is_double || !(st->low[slot] <= d && d <= st->high[slot])) {
        return 0; /* not a double, out of bounds or NaN: counted the careful way */
    }
    if (st->kind[slot] != 2 || op == SLOT_SET || (op == SLOT_MIN && d < st->dv[slot])
        || (op == SLOT_MAX && d > st->dv[slot])) {
        st->dv[slot] = d;
    }
    st->kind[slot] = 2;
    return 1;
}

/* The slots' values as a list (None where nothing came). */
static PyObject *
slots_list(const slot_state *st)
{
    PyObject *out = PyList_New(st->slots);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < st->slots; i++) {
        PyObject *v;
        if (st->kind[i] == 1) {
            v = PyLong_FromUnsignedLongLong(st->uv[i]);
        }
        else if (st->kind[i] == 2) {
            v = PyFloat_FromDouble(st->dv[i]);
        }
        else {
            v = Py_NewRef(Py_None);
        }
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

PyDoc_STRVAR(optics_slots_doc,
"optics_slots(updates, layout, bounds) -> list | None\n\n"
"One planned link-health Notification's values in slots: ``layout[path bytes]`` is a code\n"
"``slot * 8 + op`` (op 0: a leaf nothing reads; 1: a uint_val stored; 2, 3, 4: a double_val\n"
"stored, or the lowest or the highest kept), ``bounds[slot]`` the (low, high) a double must lie\n"
"in. A list of len(bounds) values (None where nothing came). None when any update is not\n"
"Update{path (< 128 bytes), val{uint_val | double_val}}, its path is not in ``layout``, its value\n"
"is not of its op's type or a double is outside its bounds (NaN included): the caller decodes\n"
"that notification another way (collector/gnmi_optics.py _slots is the twin).");

static PyObject *
optics_slots(PyObject *self, PyObject *args)
{
    PyObject *updates, *layout, *bounds;
    if (!PyArg_ParseTuple(args, "OO!O!:optics_slots", &updates, &PyDict_Type, &layout, &PyTuple_Type, &bounds)) {
        return NULL;
    }
    slot_state st;
    if (slots_begin(bounds, &st, "optics_slots") < 0) {
        return NULL;
    }
    /* a tuple of our own, as in fast_values: a key's __eq__ can run Python that changes the caller's list */
    PyObject *seq = PySequence_Tuple(updates);
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(seq);
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *u = PyTuple_GET_ITEM(seq, k);
        if (!PyBytes_Check(u)) {
            goto hand_back;
        }
        int got = slots_take(&st, (const unsigned char *)PyBytes_AS_STRING(u), PyBytes_GET_SIZE(u), layout);
        if (got <= 0) {
            if (got < 0) {
                Py_DECREF(seq);
                return NULL;
            }
            goto hand_back;
        }
    }
    Py_DECREF(seq);
    return slots_list(&st);
hand_back:
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

/* A varint at p[*pos:end], at most 64 bits wide; *pos moved past it. 0: truncated or wider. */
static int
next_varint(const unsigned char *p, Py_ssize_t end, Py_ssize_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 10 && *pos < end; i++) {
        unsigned char b = p[(*pos)++];
        if (i == 9 && b > 1) {
            return 0;
        }
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* A length-delimited field's payload at p[*pos:end]: its start and length, *pos moved past it. */
static int
next_bytes(const unsigned char *p, Py_ssize_t end, Py_ssize_t *pos, Py_ssize_t *start, Py_ssize_t *len)
{
    uint64_t n;
    if (!next_varint(p, end, pos, &n) || n > (uint64_t)(end - *pos)) {
        return 0;
    }
    *start = *pos;
    *len = (Py_ssize_t)n;
    *pos += (Py_ssize_t)n;
    return 1;
}

#define MAX_NOTE_UPDATES 1024

PyDoc_STRVAR(optics_note_doc,
"optics_note(raw, plans) -> tuple | None\n\n"
"A serialized SubscribeResponse that is one Notification (timestamp, prefix, updates; nothing\n"
"else) whose prefix bytes have a plan in ``plans`` (prefix bytes -> an object with ``layout`` and\n"
"``bounds``, or None), read into that plan's slots as optics_slots reads updates:\n"
"(timestamp, plan, values, updates). None for any other message, a prefix without a plan, or\n"
"an update optics_slots hands back: the caller decodes it the careful way\n"
"(collector/gnmi_optics.py _note is the twin).");

static PyObject *
optics_note(PyObject *self, PyObject *args)
{
    PyObject *raw, *plans;
    if (!PyArg_ParseTuple(args, "O!O!:optics_note", &PyBytes_Type, &raw, &PyDict_Type, &plans)) {
        return NULL;
    }
    /* raw is immutable and held by the call's arguments: spans into it stay valid throughout */
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(raw);
    Py_ssize_t end = PyBytes_GET_SIZE(raw), pos = 0, note = -1, note_n = 0;
    uint64_t tag;
    while (pos < end) { /* SubscribeResponse: update (1) once, nothing else */
        if (!next_varint(p, end, &pos, &tag) || tag != ((1 << 3) | 2) || note >= 0
            || !next_bytes(p, end, &pos, &note, &note_n)) {
            Py_RETURN_NONE;
        }
    }
    if (note < 0) {
        Py_RETURN_NONE;
    }
    /* Notification: timestamp (1) and prefix (2) at most once, updates (4); nothing else */
    Py_ssize_t upd[MAX_NOTE_UPDATES], upd_n[MAX_NOTE_UPDATES], count = 0, prefix = -1, prefix_n = 0, start, len;
    uint64_t ts = 0;
    int has_ts = 0;
    pos = note;
    end = note + note_n;
    while (pos < end) {
        if (!next_varint(p, end, &pos, &tag)) {
            Py_RETURN_NONE;
        }
        if (tag == ((1 << 3) | 0) && !has_ts) {
            if (!next_varint(p, end, &pos, &ts)) {
                Py_RETURN_NONE;
            }
            has_ts = 1;
        }
        else if (tag == ((2 << 3) | 2) && prefix < 0) {
            if (!next_bytes(p, end, &pos, &prefix, &prefix_n)) {
                Py_RETURN_NONE;
            }
        }
        else if (tag == ((4 << 3) | 2) && count < MAX_NOTE_UPDATES) {
            if (!next_bytes(p, end, &pos, &start, &len)) {
                Py_RETURN_NONE;
            }
            upd[count] = start;
            upd_n[count++] = len;
        }
        else {
            Py_RETURN_NONE;
        }
    }
    PyObject *key = PyBytes_FromStringAndSize(prefix < 0 ? "" : (const char *)p + prefix, prefix < 0 ? 0 : prefix_n);
    if (key == NULL) {
        return NULL;
    }
    PyObject *plan = PyDict_GetItemWithError(plans, key); /* borrowed */
    Py_DECREF(key);
    if (plan == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    if (plan == Py_None) {
        Py_RETURN_NONE;
    }
    Py_INCREF(plan); /* ours: the layout's lookups may run Python */
    PyObject *layout = PyObject_GetAttrString(plan, "layout");
    PyObject *bounds = layout == NULL ? NULL : PyObject_GetAttrString(plan, "bounds");
    PyObject *out = NULL;
    slot_state st;
    if (bounds == NULL) {
        goto done;
    }
    if (!PyDict_Check(layout) || !PyTuple_Check(bounds)) {
        PyErr_SetString(PyExc_TypeError, "optics_note: a plan's layout is a dict and its bounds a tuple");
        goto done;
    }
    if (slots_begin(bounds, &st, "optics_note") < 0) {
        goto done;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        int got = slots_take(&st, p + upd[k], upd_n[k], layout);
        if (got <= 0) {
            if (got == 0) {
                out = Py_NewRef(Py_None);
            }
            goto done;
        }
    }
    PyObject *values = slots_list(&st);
    if (values != NULL) {
        out = Py_BuildValue("(LONn)", (long long)(int64_t)ts, plan, values, count);
    }
done:
    Py_XDECREF(layout);
    Py_XDECREF(bounds);
    Py_DECREF(plan);
    return out;
}

/* v: None, or an exact int in [0, 2**64). 1 and *out set, 0 for None, -1 otherwise. */
static int
as_counter(PyObject *v, uint64_t *out)
{
    if (v == Py_None) {
        return 0;
    }
    if (!PyLong_CheckExact(v)) {
        return -1;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    *out = (uint64_t)x;
    return 1;
}

static int
as_time(PyObject *v, int64_t *out)
{
    if (!PyLong_CheckExact(v)) {
        return 0;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (x < 0) {
        return 0; /* before the epoch: the Python's (differences cannot overflow here) */
    }
    *out = (int64_t)x;
    return 1;
}

#define MAX_COUNTERS 64

PyDoc_STRVAR(deltas_doc,
"deltas(vals, times, values, t, wrap32, reset, names, carrier) -> tuple | None\n\n"
"collector.counters._deltas on a port's baselines (``vals``, ``times``, moved in place) and a\n"
"reading's ``values`` at ``t``: (deltas, carrier baseline time, decreased, counters, stale,\n"
"steps). None, with nothing moved, when a value, baseline or time is not a plain counter or\n"
"nanosecond int (the caller runs the Python).");

static PyObject *
deltas(PyObject *self, PyObject *args)
{
    PyObject *vals, *times, *values, *t_obj, *wrap32, *names;
    int reset;
    Py_ssize_t carrier;
    if (!PyArg_ParseTuple(args, "O!O!O!OOpO!n:deltas", &PyList_Type, &vals, &PyList_Type, &times, &PyTuple_Type,
                          &values, &t_obj, &wrap32, &reset, &PyTuple_Type, &names, &carrier)) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(values);
    int64_t t;
    if (!PyAnySet_Check(wrap32) || n > MAX_COUNTERS || PyTuple_GET_SIZE(names) < n || PyList_GET_SIZE(vals) < n || PyList_GET_SIZE(times) < n
        || !as_time(t_obj, &t)) {
        Py_RETURN_NONE;
    }
    /* check everything first: nothing is moved unless all of it is ours to do */
    uint64_t nv[MAX_COUNTERS], bv[MAX_COUNTERS];
    int64_t bt[MAX_COUNTERS];
    int has_new[MAX_COUNTERS], has_before[MAX_COUNTERS];
    for (Py_ssize_t i = 0; i < n; i++) {
        int r = as_counter(PyTuple_GET_ITEM(values, i), &nv[i]);
        if (r < 0) {
            Py_RETURN_NONE;
        }
        has_new[i] = r;
        has_before[i] = 0;
        if (!r) {
            continue;
        }
        int rb = as_counter(PyList_GET_ITEM(vals, i), &bv[i]);
        if (rb < 0) {
            Py_RETURN_NONE;
        }
        has_before[i] = rb;
        if (rb && !reset && !as_time(PyList_GET_ITEM(times, i), &bt[i])) {
            Py_RETURN_NONE;
        }
    }
    PyObject *out = PyDict_New();
    if (out == NULL) {
        return NULL;
    }
    long counters = 0, stale = 0, steps = 0;
    int decreased = 0;
    int64_t carrier_t0 = 0;
    int has_carrier = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!has_new[i]) {
            continue;
        }
        counters++;
        PyObject *nv_obj = PyTuple_GET_ITEM(values, i);
        if (!has_before[i] || reset) {
            Py_INCREF(nv_obj);
            PyList_SetItem(vals, i, nv_obj);
            Py_INCREF(t_obj);
            PyList_SetItem(times, i, t_obj);
            continue;
        }
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (t <= bt[i]) {
            int wraps = 0;
            if (nv[i] > bv[i]) {
                wraps = PySet_Contains(wrap32, name);
                if (wraps < 0) {
                    goto error;
                }
            }
            if (nv[i] > bv[i] && !wraps) {
                /* moved on at an earlier time: the switch's clock stepped back; a new baseline */
                Py_INCREF(nv_obj);
                PyList_SetItem(vals, i, nv_obj);
                Py_INCREF(t_obj);
                PyList_SetItem(times, i, t_obj);
                steps++;
            } else {
                stale++;
            }
            continue;
        }
        Py_INCREF(nv_obj);
        PyList_SetItem(vals, i, nv_obj);
        Py_INCREF(t_obj);
        PyList_SetItem(times, i, t_obj);
        uint64_t d;
        if (nv[i] < bv[i]) {
            int wraps = PySet_Contains(wrap32, name);
            if (wraps < 0) {
                goto error;
            }
            if (!wraps) {
                decreased = 1;
                continue;
            }
            d = (nv[i] - bv[i]) & 0xFFFFFFFFu; /* the 32-bit counter wrapped */
        } else {
            d = nv[i] - bv[i];
        }
        PyObject *entry = Py_BuildValue("(Kd)", (unsigned long long)d, (double)(t - bt[i]) / 1e9);
        if (entry == NULL) {
            goto error;
        }
        int failed = PyDict_SetItem(out, name, entry);
        Py_DECREF(entry);
        if (failed) {
            goto error;
        }
        if (i == carrier) {
            carrier_t0 = bt[i];
            has_carrier = 1;
        }
    }
    PyObject *t0 = has_carrier ? PyLong_FromLongLong(carrier_t0) : (Py_INCREF(Py_None), Py_None);
    if (t0 == NULL) {
        goto error;
    }
    return Py_BuildValue("(NNNlll)", out, t0, PyBool_FromLong(decreased), counters, stale, steps);
error:
    Py_DECREF(out);
    return NULL;
}

/* One rate: a delta (d, dt) from the deltas dict as d * scale / dt. 1 found, 0 absent, -1 not that shape. */
static int
rate_of(PyObject *deltas, PyObject *name, double scale, double *out, double *dt_out)
{
    PyObject *x = PyDict_GetItemWithError(deltas, name);
    if (x == NULL) {
        return PyErr_Occurred() ? -2 : 0;
    }
    if (!PyTuple_CheckExact(x) || PyTuple_GET_SIZE(x) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(x, 0))
        || !PyFloat_CheckExact(PyTuple_GET_ITEM(x, 1))) {
        return -1;
    }
    double dt = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(x, 1));
    double d = PyLong_AsDouble(PyTuple_GET_ITEM(x, 0));
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (dt == 0.0 || !isfinite(d * scale)) {
        return -1; /* Python raises, or rounds the product differently: its path says so */
    }
    *out = d * scale / dt;
    *dt_out = dt;
    return 1;
}

/* A rate within ``limit`` goes into its slot; one above it is absurd: dropped and counted. */
static void
keep_rate(double value, double limit, int slot, double *rates, int *has, long *absurd)
{
    if (value > limit) {
        (*absurd)++;
    } else {
        rates[slot] = value;
        has[slot] = 1;
    }
}

#define ROW_HEAD 5
#define ROW_RATES 10 /* interval_s, in/out bps, in/out pps, five per-second rates */
/* rate_names: in_octets, its three packet counters, out_octets, its three, then the five per-second */
#define RATE_NAMES 13

PyDoc_STRVAR(port_row_doc,
"port_row(cls, time, switch, port, oper, speed, values, deltas, max_bps, max_pps, reset, names,\n"
"         rate_names) -> (row, absurd) | None\n\n"
"CounterTracker._rates and _sample in one call: the port_counters row (a ``cls``, the PortSample\n"
"tuple type) of a reading's head, its counters ``values`` (as bigints) and the rates of\n"
"``deltas`` (name -> (delta, seconds); None: no rates), a rate above ``max_bps`` / ``max_pps``\n"
"(what the port can carry) dropped and counted in ``absurd``. None when an input is not of the\n"
"shape the Python takes without question: the caller runs the Python.");

static PyObject *
port_row(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "port_row takes 13 arguments");
        return NULL;
    }
    PyObject *cls = args[0], *values = args[6], *deltas = args[7], *max_bps_obj = args[8], *max_pps_obj = args[9];
    PyObject *reset = args[10], *names = args[11], *rate_names = args[12];
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type) || !PyTuple_CheckExact(values)
        || !PyTuple_CheckExact(names) || !PyTuple_CheckExact(rate_names) || PyTuple_GET_SIZE(rate_names) != RATE_NAMES
        || !PyFloat_CheckExact(max_bps_obj) || !PyFloat_CheckExact(max_pps_obj) || !PyBool_Check(reset)
        || (deltas != Py_None && !PyDict_CheckExact(deltas))) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(values);
    if (PyTuple_GET_SIZE(names) < n) {
        Py_RETURN_NONE;
    }
    double rates[ROW_RATES];
    int has[ROW_RATES] = {0};
    long absurd = 0;
    if (deltas != Py_None && PyDict_GET_SIZE(deltas) > 0) {
        double max_bps = PyFloat_AS_DOUBLE(max_bps_obj), max_pps = PyFloat_AS_DOUBLE(max_pps_obj);
        double dt;
        for (int dir = 0; dir < 2; dir++) {
            double bps;
            int r = rate_of(deltas, PyTuple_GET_ITEM(rate_names, 4 * dir), 8.0, &bps, &dt);
            if (r < 0) {
                goto hand_back;
            }
            if (r) {
                keep_rate(bps, max_bps, 1 + dir, rates, has, &absurd);
            }
            double pps = 0.0, one;
            int all = 1;
            for (int k = 1; k <= 3; k++) {
                r = rate_of(deltas, PyTuple_GET_ITEM(rate_names, 4 * dir + k), 1.0, &one, &dt);
                if (r < 0) {
                    goto hand_back;
                }
                if (r == 0) {
                    all = 0;
                    break;
                }
                pps = k == 1 ? one : pps + one; /* a + b + c, left to right, as _rates adds them */
            }
            if (all) {
                keep_rate(pps, max_pps, 3 + dir, rates, has, &absurd);
            }
        }
        for (int k = 0; k < 5; k++) {
            double ps;
            int r = rate_of(deltas, PyTuple_GET_ITEM(rate_names, 8 + k), 1.0, &ps, &dt);
            if (r < 0) {
                goto hand_back;
            }
            if (r) {
                keep_rate(ps, max_pps, 5 + k, rates, has, &absurd);
            }
        }
        for (Py_ssize_t i = 0; i < n; i++) { /* interval_s: that of the first counter with a delta */
            double unused;
            int r = rate_of(deltas, PyTuple_GET_ITEM(names, i), 1.0, &unused, &dt);
            if (r < 0) {
                goto hand_back;
            }
            if (r) {
                rates[0] = dt;
                has[0] = 1;
                break;
            }
        }
    }
    PyObject *items = PyTuple_New(ROW_HEAD + n + ROW_RATES + 1);
    if (items == NULL) {
        return NULL;
    }
    for (int k = 0; k < ROW_HEAD; k++) {
        PyTuple_SET_ITEM(items, k, Py_NewRef(args[1 + k]));
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(values, i), *stored;
        if (v == Py_None) {
            stored = Py_NewRef(v);
        } else if (!PyLong_CheckExact(v)) {
            Py_DECREF(items);
            Py_RETURN_NONE;
        } else {
            int overflow;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (!overflow && x >= 0) {
                stored = Py_NewRef(v);
            } else { /* a bigint holds its 64 bits: v mod 2^64, two's complement past 2^63 */
                unsigned long long bits = PyLong_AsUnsignedLongLongMask(v);
                stored = bits == (unsigned long long)-1 && PyErr_Occurred() ? NULL : PyLong_FromLongLong((long long)bits);
                if (stored == NULL) {
                    Py_DECREF(items);
                    return NULL;
                }
            }
        }
        PyTuple_SET_ITEM(items, ROW_HEAD + i, stored);
    }
    for (int k = 0; k < ROW_RATES; k++) {
        PyObject *r = has[k] ? PyFloat_FromDouble(rates[k]) : Py_NewRef(Py_None);
        if (r == NULL) {
            Py_DECREF(items);
            return NULL;
        }
        PyTuple_SET_ITEM(items, ROW_HEAD + n + k, r);
    }
    PyTuple_SET_ITEM(items, ROW_HEAD + n + ROW_RATES, Py_NewRef(reset));
    /* tuple.__new__(cls, items), as NamedTuple._make does: the interpreter fills in the subtype */
    PyObject *new_args = PyTuple_Pack(1, items);
    Py_DECREF(items);
    if (new_args == NULL) {
        return NULL;
    }
    PyObject *row = PyTuple_Type.tp_new((PyTypeObject *)cls, new_args, NULL);
    Py_DECREF(new_args);
    if (row == NULL) {
        return NULL;
    }
    return Py_BuildValue("(Nl)", row, absurd);
hand_back:
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fast_values", fast_values, METH_VARARGS, fast_values_doc},
    {"optics_pairs", optics_pairs, METH_VARARGS, optics_pairs_doc},
    {"optics_slots", optics_slots, METH_VARARGS, optics_slots_doc},
    {"optics_note", optics_note, METH_VARARGS, optics_note_doc},
    {"deltas", deltas, METH_VARARGS, deltas_doc},
    {"port_row", (PyCFunction)(void (*)(void))port_row, METH_FASTCALL, port_row_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "collector._speedups",
    .m_doc = "The collector's per-value path in C (see _speedups.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *m = PyModule_Create(&module);
    /* collector/speedups.py ABI: raised with any change of a function's arguments or results */
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", 5) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
