/*
 * Records between librdkafka and column buffers, with no Python object per record: a consumer's fetched
 * records into Arrow-layout buffers (Fetcher), and a producer's records out of them (produce_rows).
 *
 * Fetching:
 * confluent-kafka's consume() makes a Message, and a bytes object for every key and value, for each record;
 * the source then copies them again into Arrow columns. Here the partitions' fetch queues are forwarded to
 * a queue of our own on the same librdkafka handle (rd_kafka_queue_forward marks the forward as the
 * application's, so librdkafka's own fetch starts keep it), and each batch taken from it is copied once,
 * straight into buffers laid out as Arrow's binary columns. The handle, its settings, logs and callbacks
 * stay confluent-kafka's: only fetched records and partition errors reach this queue, so no callback of
 * confluent-kafka's ever runs here.
 *
 * Producing: confluent-kafka's produce() takes one record per call, as Python objects, and its
 * produce_batch() takes no headers, while every record the compactor emits carries kcompact.offset. Here a
 * run of records goes to rd_kafka_producev in one call from Python, on confluent-kafka's producer handle,
 * with no delivery callback (confluent-kafka's own skips a message that has no state of its own), so its
 * transactions, flushes and polls stay confluent-kafka's. A record's value is not copied (no RD_KAFKA_MSG_F_COPY):
 * librdkafka reads it from the caller's buffer until the record is done, so the caller holds the buffers until
 * the producer has no record outstanding (streaming.kafka.sink.held_buffers). Keys and headers librdkafka copies
 * whatever the flags.
 *
 * librdkafka's functions are looked up in the copy confluent-kafka loaded (bind()), not linked: the same
 * library instance owns the handle, and no librdkafka headers are needed to build this. The few types used
 * are librdkafka's public, stable ABI (rdkafka.h). A client's rd_kafka_t is read from its confluent-kafka
 * object, right after PyObject_HEAD, at every call (a closed client holds NULL there): streaming.kafka.native.gate
 * lets no client reach here whose version was not tested to keep it there.
 *
 * Every entry point checks what it is given before it touches memory (lengths, offsets, alignment, validity
 * bitmaps, a bound library, an open client) and raises a Python exception naming the argument at fault.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_queue_s rd_kafka_queue_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef struct rd_kafka_headers_s rd_kafka_headers_t;

typedef struct rd_kafka_message_s {
    int err;
    rd_kafka_topic_t *rkt;
    int32_t partition;
    void *payload;
    size_t len;
    void *key;
    size_t key_len;
    int64_t offset;
    void *_private;
} rd_kafka_message_t;

#define ERR_BAD_MSG (-199) /* RD_KAFKA_RESP_ERR__BAD_MSG */
enum { V_END, V_TOPIC, V_RKT, V_PARTITION, V_VALUE, V_KEY, V_OPAQUE, V_MSGFLAGS, V_TIMESTAMP, V_HEADER, V_HEADERS };

static struct {
    rd_kafka_queue_t *(*queue_new)(rd_kafka_t *);
    rd_kafka_queue_t *(*queue_get_partition)(rd_kafka_t *, const char *, int32_t);
    void (*queue_forward)(rd_kafka_queue_t *, rd_kafka_queue_t *);
    void (*queue_destroy)(rd_kafka_queue_t *);
    ssize_t (*consume_batch_queue)(rd_kafka_queue_t *, int, rd_kafka_message_t **, size_t);
    void (*message_destroy)(rd_kafka_message_t *);
    int64_t (*message_timestamp)(const rd_kafka_message_t *, int *);
    int (*message_headers)(const rd_kafka_message_t *, rd_kafka_headers_t **);
    int (*header_get_all)(const rd_kafka_headers_t *, size_t, const char **, const void **, size_t *);
    const char *(*topic_name)(const rd_kafka_topic_t *);
    const char *(*err2str)(int);
    const char *(*name)(const rd_kafka_t *);
    int (*type)(const rd_kafka_t *);
    rd_kafka_topic_t *(*topic_new)(rd_kafka_t *, const char *, void *);
    void (*topic_destroy)(rd_kafka_topic_t *);
    int (*producev)(rd_kafka_t *, ...);
    rd_kafka_headers_t *(*headers_new)(size_t);
    void (*headers_destroy)(rd_kafka_headers_t *);
    int (*header_add)(rd_kafka_headers_t *, const char *, ssize_t, const void *, ssize_t);
    int (*fatal_error)(rd_kafka_t *, char *, size_t);
} rd;

static int bound = 0;

static PyObject *bind(PyObject *self, PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path))
        return NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL) {
        PyErr_Format(PyExc_ImportError, "librdkafka at %s is not loaded: %s", path, dlerror());
        return NULL;
    }
#define FIND(field, symbol)                                                                  \
    if ((*(void **)&rd.field = dlsym(lib, symbol)) == NULL) {                                \
        PyErr_Format(PyExc_ImportError, "librdkafka at %s has no %s", path, symbol);        \
        return NULL;                                                                         \
    }
    FIND(queue_new, "rd_kafka_queue_new")
    FIND(queue_get_partition, "rd_kafka_queue_get_partition")
    FIND(queue_forward, "rd_kafka_queue_forward")
    FIND(queue_destroy, "rd_kafka_queue_destroy")
    FIND(consume_batch_queue, "rd_kafka_consume_batch_queue")
    FIND(message_destroy, "rd_kafka_message_destroy")
    FIND(message_timestamp, "rd_kafka_message_timestamp")
    FIND(message_headers, "rd_kafka_message_headers")
    FIND(header_get_all, "rd_kafka_header_get_all")
    FIND(topic_name, "rd_kafka_topic_name")
    FIND(err2str, "rd_kafka_err2str")
    FIND(name, "rd_kafka_name")
    FIND(type, "rd_kafka_type")
    FIND(topic_new, "rd_kafka_topic_new")
    FIND(topic_destroy, "rd_kafka_topic_destroy")
    FIND(producev, "rd_kafka_producev")
    FIND(headers_new, "rd_kafka_headers_new")
    FIND(headers_destroy, "rd_kafka_headers_destroy")
    FIND(header_add, "rd_kafka_header_add")
    FIND(fatal_error, "rd_kafka_fatal_error")
#undef FIND
    bound = 1;
    Py_RETURN_NONE;
}

static int check_bound(void) {
    if (!bound)
        PyErr_SetString(PyExc_RuntimeError, "bind() librdkafka first");
    return bound;
}

/* The rd_kafka_t a confluent-kafka client object holds (its Handle's first field), or NULL with an exception
 * when the client is closed. */
static rd_kafka_t *rk_of(PyObject *client, const char *what) {
    rd_kafka_t *rk = *(rd_kafka_t **)((char *)client + sizeof(PyObject));
    if (rk == NULL)
        PyErr_Format(PyExc_RuntimeError, "the %s is closed", what);
    return rk;
}

static PyObject *handle_name(PyObject *self, PyObject *args) {
    PyObject *client;
    int type;
    if (!PyArg_ParseTuple(args, "Oi", &client, &type) || !check_bound())
        return NULL;
    rd_kafka_t *rk = *(rd_kafka_t **)((char *)client + sizeof(PyObject));
    if (rk == NULL || rd.type(rk) != type)
        Py_RETURN_NONE;
    return PyUnicode_FromString(rd.name(rk));
}

typedef struct {
    PyObject_HEAD
    PyObject *consumer; /* held, so its handle outlives the queue */
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue;
    rd_kafka_message_t **msgs; /* taken from the queue, not yet handed over: msgs[next:have] */
    size_t capacity, have, next;
    int busy; /* a fetch waits in librdkafka with the GIL released: close() and a second fetch are refused */
} Fetcher;

/* The consumer still holds the handle the queue was made on: a consumer closed first has freed it. */
static int handle_alive(Fetcher *f) {
    return f->consumer != NULL && *(rd_kafka_t **)((char *)f->consumer + sizeof(PyObject)) == f->rk;
}

static void release(Fetcher *f) {
    if (f->queue != NULL && handle_alive(f)) {
        for (size_t i = f->next; i < f->have; i++)
            rd.message_destroy(f->msgs[i]);
        rd.queue_destroy(f->queue);
    } /* else the handle is gone, and with it the messages and the queue: nothing is left to free */
    f->next = f->have = 0;
    f->queue = NULL;
    PyMem_Free(f->msgs);
    f->msgs = NULL;
    Py_CLEAR(f->consumer);
}

/* The fetcher can be used now: open, its consumer open, no fetch running. */
static int usable(Fetcher *f) {
    if (f->busy)
        PyErr_SetString(PyExc_RuntimeError, "a fetch of this fetcher is running in another thread");
    else if (f->queue == NULL)
        PyErr_SetString(PyExc_RuntimeError, "the fetcher is closed");
    else if (!handle_alive(f))
        PyErr_SetString(PyExc_RuntimeError, "the consumer was closed before its fetcher");
    else
        return 1;
    return 0;
}

static int Fetcher_init(Fetcher *f, PyObject *args, PyObject *kwds) {
    PyObject *consumer;
    Py_ssize_t capacity;
    if (!PyArg_ParseTuple(args, "On", &consumer, &capacity) || !check_bound())
        return -1;
    if (f->busy) {
        PyErr_SetString(PyExc_RuntimeError, "a fetch of this fetcher is running in another thread");
        return -1;
    }
    if (capacity < 1 || (size_t)capacity > SIZE_MAX / sizeof(*f->msgs)) {
        PyErr_Format(PyExc_ValueError, "capacity must be at least 1, got %zd", capacity);
        return -1;
    }
    rd_kafka_t *rk = rk_of(consumer, "consumer");
    if (rk == NULL)
        return -1;
    release(f); /* __init__ called again: what the first made goes first */
    f->msgs = PyMem_Calloc((size_t)capacity, sizeof(*f->msgs));
    if (f->msgs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    f->capacity = (size_t)capacity;
    f->rk = rk;
    f->consumer = Py_NewRef(consumer);
    f->queue = rd.queue_new(rk);
    if (f->queue == NULL) {
        release(f);
        PyErr_SetString(PyExc_RuntimeError, "librdkafka made no queue");
        return -1;
    }
    return 0;
}

static void Fetcher_dealloc(Fetcher *f) {
    release(f);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

static PyObject *Fetcher_forward(Fetcher *f, PyObject *args) {
    const char *topic;
    int partition;
    if (!PyArg_ParseTuple(args, "si", &topic, &partition) || !usable(f))
        return NULL;
    if (partition < 0)
        return PyErr_Format(PyExc_ValueError, "partition must be >= 0, got %d", partition);
    rd_kafka_queue_t *partq = rd.queue_get_partition(f->rk, topic, partition);
    if (partq == NULL) {
        PyErr_Format(PyExc_RuntimeError, "no fetch queue for %s-%d", topic, partition);
        return NULL;
    }
    rd.queue_forward(partq, f->queue);
    rd.queue_destroy(partq);
    Py_RETURN_NONE;
}

static PyObject *Fetcher_close(Fetcher *f, PyObject *unused) {
    if (f->busy) {
        PyErr_SetString(PyExc_RuntimeError, "close() while a fetch of this fetcher runs in another thread");
        return NULL;
    }
    release(f);
    Py_RETURN_NONE;
}

/* A new bytes object of n bytes (contents unset), or NULL with an exception. */
static PyObject *bytes_of(size_t n, char **data) {
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (b != NULL)
        *data = PyBytes_AS_STRING(b);
    return b;
}

/* A validity bitmap of n bits all set, to clear the nulls in; None (no nulls) when not wanted. */
static PyObject *bitmap_of(int wanted, size_t n, uint8_t **bits) {
    *bits = NULL;
    if (!wanted)
        Py_RETURN_NONE;
    char *data;
    PyObject *b = bytes_of((n + 7) / 8 + 1, &data);
    if (b != NULL) {
        memset(data, 0xff, (n + 7) / 8 + 1);
        *bits = (uint8_t *)data;
    }
    return b;
}

/* Append a new reference (NULL: the exception already set) to list; 0, with an exception, on failure. */
static int append_new(PyObject *list, PyObject *item) {
    if (item == NULL)
        return 0;
    int ok = PyList_Append(list, item) == 0;
    Py_DECREF(item);
    return ok;
}

/* Mark item i of a validity bitmap as null. */
static inline void clear_bit(uint8_t *bits, size_t i) {
    bits[i >> 3] &= (uint8_t)~(1u << (i & 7));
}

static size_t header_count(rd_kafka_headers_t *hdrs, size_t *names, size_t *values, int *null_value) {
    const char *name;
    const void *value;
    size_t size, idx = 0;
    while (rd.header_get_all(hdrs, idx, &name, &value, &size) == 0) {
        *names += strlen(name);
        *values += value == NULL ? 0 : size;
        *null_value |= value == NULL;
        idx++;
    }
    return idx;
}

/*
 * fetch(max_records, timeout_ms, max_bytes) -> None when nothing came within the timeout, else
 * (count, events, columns): the next records, at most max_records and, past the first, no more than
 * max_bytes of keys, values and headers (so 32-bit Arrow offsets always hold);
 * events, in the order they came: (first index, topic, partition) where a stretch of one partition's records
 * starts, (index the error came before, topic or None, partition, code, text) for an error;
 * columns: (offsets int64, timestamps int64, timestamp types int8, key bitmap|None, key offsets int32,
 *           key data, value bitmap|None, value offsets, value data, header list offsets int32|None,
 *           header name offsets, header names, header value bitmap|None, header value offsets, header values).
 */
static PyObject *Fetcher_fetch(Fetcher *f, PyObject *args) {
    Py_ssize_t max_records, max_bytes;
    int timeout_ms;
    if (!PyArg_ParseTuple(args, "nin", &max_records, &timeout_ms, &max_bytes) || !usable(f))
        return NULL;
    if (max_records < 1)
        return PyErr_Format(PyExc_ValueError, "max_records must be at least 1, got %zd", max_records);
    if (timeout_ms < 0)
        return PyErr_Format(PyExc_ValueError, "timeout_ms must be >= 0, got %d", timeout_ms);
    if (max_bytes < 0 || max_bytes > INT32_MAX)
        return PyErr_Format(PyExc_ValueError, "max_bytes must be within [0, %d] (32-bit Arrow offsets), got %zd",
                            INT32_MAX, max_bytes);
    if (f->next == f->have) {
        size_t want = (size_t)max_records;
        ssize_t got;
        f->busy = 1;
        Py_BEGIN_ALLOW_THREADS
        got = rd.consume_batch_queue(f->queue, timeout_ms, f->msgs, want < f->capacity ? want : f->capacity);
        Py_END_ALLOW_THREADS
        f->busy = 0;
        if (got < 0)
            return PyErr_Format(PyExc_RuntimeError, "rd_kafka_consume_batch_queue failed (%zd)", got);
        f->next = 0;
        f->have = (size_t)got;
        if (got == 0)
            Py_RETURN_NONE;
    }
    /* what the next records need, up to the limits */
    size_t first = f->next, stop = first, n = 0, key_bytes = 0, value_bytes = 0, hdr_total = 0, name_bytes = 0,
           hval_bytes = 0;
    int key_null = 0, value_null = 0, hval_null = 0, any_headers = 0;
    for (; stop < f->have && n < (size_t)max_records; stop++) {
        rd_kafka_message_t *m = f->msgs[stop];
        if (m->err)
            continue;
        size_t names = 0, values = 0, count = 0;
        rd_kafka_headers_t *hdrs;
        if (rd.message_headers(m, &hdrs) == 0)
            count = header_count(hdrs, &names, &values, &hval_null);
        size_t bytes = (m->key ? m->key_len : 0) + (m->payload ? m->len : 0) + names + values;
        if (n > 0 && key_bytes + value_bytes + name_bytes + hval_bytes + bytes > (size_t)max_bytes)
            break;
        if (bytes > INT32_MAX) /* alone in its batch, it would still overflow 32-bit offsets */
            return PyErr_Format(PyExc_ValueError, "the record of %s-%d at offset %lld holds %zu bytes, more than "
                                "an Arrow binary column takes", rd.topic_name(m->rkt), (int)m->partition,
                                (long long)m->offset, bytes);
        n++;
        key_bytes += m->key ? m->key_len : 0;
        value_bytes += m->payload ? m->len : 0;
        key_null |= m->key == NULL;
        value_null |= m->payload == NULL;
        any_headers |= count > 0;
        hdr_total += count;
        name_bytes += names;
        hval_bytes += values;
    }
    char *offsets, *stamps, *kinds, *key_offs, *key_data, *val_offs, *val_data, *hdr_offs = NULL, *name_offs,
         *names, *hval_offs, *hvals;
    uint8_t *key_bits, *val_bits, *hval_bits;
    PyObject *cols = PyTuple_New(15), *events = PyList_New(0);
    if (cols == NULL || events == NULL)
        goto fail;
#define SET(i, expr)                      \
    {                                     \
        PyObject *_o = (expr);            \
        if (_o == NULL)                   \
            goto fail;                    \
        PyTuple_SET_ITEM(cols, i, _o);    \
    }
    SET(0, bytes_of(8 * n, &offsets))
    SET(1, bytes_of(8 * n, &stamps))
    SET(2, bytes_of(n, &kinds))
    SET(3, bitmap_of(key_null, n, &key_bits))
    SET(4, bytes_of(4 * (n + 1), &key_offs))
    SET(5, bytes_of(key_bytes, &key_data))
    SET(6, bitmap_of(value_null, n, &val_bits))
    SET(7, bytes_of(4 * (n + 1), &val_offs))
    SET(8, bytes_of(value_bytes, &val_data))
    if (any_headers) {
        SET(9, bytes_of(4 * (n + 1), &hdr_offs))
    } else {
        SET(9, Py_NewRef(Py_None))
    }
    SET(10, bytes_of(4 * (hdr_total + 1), &name_offs))
    SET(11, bytes_of(name_bytes, &names))
    SET(12, bitmap_of(hval_null, hdr_total, &hval_bits))
    SET(13, bytes_of(4 * (hdr_total + 1), &hval_offs))
    SET(14, bytes_of(hval_bytes, &hvals))
#undef SET
    int64_t *off64 = (int64_t *)offsets, *ts64 = (int64_t *)stamps;
    int32_t *ko = (int32_t *)key_offs, *vo = (int32_t *)val_offs, *ho = (int32_t *)hdr_offs,
            *no = (int32_t *)name_offs, *hvo = (int32_t *)hval_offs;
    int32_t kpos = 0, vpos = 0, hpos = 0, npos = 0, hvpos = 0;
    ko[0] = vo[0] = no[0] = hvo[0] = 0;
    if (ho != NULL)
        ho[0] = 0;
    rd_kafka_topic_t *run_topic = NULL;
    int32_t run_partition = -1;
    size_t i = 0;
    for (size_t k = first; k < stop; k++) {
        rd_kafka_message_t *m = f->msgs[k];
        if (m->err) {
            const char *topic = m->rkt ? rd.topic_name(m->rkt) : NULL;
            PyObject *text = m->payload ? PyUnicode_DecodeUTF8(m->payload, (Py_ssize_t)m->len, "replace")
                                        : PyUnicode_FromString(rd.err2str(m->err));
            if (text == NULL ||
                !append_new(events, Py_BuildValue("(nziiN)", (Py_ssize_t)i, topic, m->partition, m->err, text)))
                goto fail;
            run_topic = NULL; /* the records after an error start a run of their own */
            continue;
        }
        if (m->rkt != run_topic || m->partition != run_partition) {
            run_topic = m->rkt;
            run_partition = m->partition;
            if (!append_new(events, Py_BuildValue("(nsi)", (Py_ssize_t)i, rd.topic_name(m->rkt), m->partition)))
                goto fail;
        }
        int kind = 0;
        off64[i] = m->offset;
        ts64[i] = rd.message_timestamp(m, &kind);
        kinds[i] = (char)kind;
        if (m->key != NULL) {
            memcpy(key_data + kpos, m->key, m->key_len);
            kpos += (int32_t)m->key_len;
        } else if (key_bits != NULL) {
            clear_bit(key_bits, i);
        }
        ko[i + 1] = kpos;
        if (m->payload != NULL) {
            memcpy(val_data + vpos, m->payload, m->len);
            vpos += (int32_t)m->len;
        } else if (val_bits != NULL) {
            clear_bit(val_bits, i);
        }
        vo[i + 1] = vpos;
        if (ho != NULL) {
            rd_kafka_headers_t *hdrs;
            if (rd.message_headers(m, &hdrs) == 0) {
                const char *name;
                const void *value;
                size_t size, idx = 0;
                while (rd.header_get_all(hdrs, idx++, &name, &value, &size) == 0) {
                    size_t len = strlen(name);
                    memcpy(names + npos, name, len);
                    npos += (int32_t)len;
                    no[hpos + 1] = npos;
                    if (value != NULL) {
                        memcpy(hvals + hvpos, value, size);
                        hvpos += (int32_t)size;
                    } else if (hval_bits != NULL) {
                        clear_bit(hval_bits, hpos);
                    }
                    hvo[hpos + 1] = hvpos;
                    hpos++;
                }
            }
            ho[i + 1] = hpos;
        }
        i++;
    }
    for (size_t k = first; k < stop; k++)
        rd.message_destroy(f->msgs[k]);
    f->next = stop;
    return Py_BuildValue("(nNN)", (Py_ssize_t)n, events, cols);
fail:
    Py_XDECREF(cols);
    Py_XDECREF(events);
    return NULL;
}

/* Avro's zigzag varint at *pos (below end); 0 when it runs past end. */
static int read_varint(const uint8_t *buf, size_t *pos, size_t end, int64_t *out) {
    uint64_t z = 0;
    for (int shift = 0; shift < 64 && *pos < end; shift += 7) {
        uint8_t b = buf[(*pos)++];
        z |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *out = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
            return 1;
        }
    }
    return 0;
}

/* The log's Avro encoding of a record's headers (array of {key: string, value: null|bytes}) added to hdrs;
 * -1 when the bytes are not such an array, else 1 when one of them is a header named origin with a value (the
 * record names its origin itself), 0 otherwise. */
static int add_headers(rd_kafka_headers_t *hdrs, const uint8_t *buf, size_t pos, size_t end, const char *origin,
                       size_t origin_len) {
    int64_t count, skip, len, branch;
    int has_origin = 0;
    while (pos < end) {
        if (!read_varint(buf, &pos, end, &count))
            return -1;
        if (count == 0)
            return pos == end ? has_origin : -1;
        if (count < 0) { /* a block with its byte size */
            count = -count;
            if (!read_varint(buf, &pos, end, &skip))
                return -1;
        }
        for (int64_t k = 0; k < count; k++) {
            if (!read_varint(buf, &pos, end, &len) || len < 0 || (size_t)len > end - pos)
                return -1;
            const char *name = (const char *)buf + pos;
            ssize_t name_len = (ssize_t)len;
            pos += (size_t)len;
            if (!read_varint(buf, &pos, end, &branch))
                return -1;
            if (branch == 0) {
                rd.header_add(hdrs, name, name_len, NULL, 0);
                continue;
            }
            if (branch != 1 || !read_varint(buf, &pos, end, &len) || len < 0 || (size_t)len > end - pos)
                return -1;
            rd.header_add(hdrs, name, name_len, buf + pos, (ssize_t)len);
            has_origin |= (size_t)name_len == origin_len && memcmp(name, origin, origin_len) == 0;
            pos += (size_t)len;
        }
    }
    return -1;
}

/* A buffer argument of int64 items, aligned for them; their count, or -1 with an exception naming it. */
static Py_ssize_t int64s(const Py_buffer *b, const char *name) {
    if (b->len % (Py_ssize_t)sizeof(int64_t) != 0 || (uintptr_t)b->buf % _Alignof(int64_t) != 0) {
        PyErr_Format(PyExc_ValueError, "%s must be aligned int64 items, got %zd bytes at %p", name, b->len, b->buf);
        return -1;
    }
    return b->len / (Py_ssize_t)sizeof(int64_t);
}

/* A binary column's offsets: n + 1 of them, aligned, and over records [start, stop) each within
 * [0, data_len] and none below the one before; 0 with an exception naming the argument otherwise. */
static int offsets_within(const Py_buffer *offsets, const char *name, Py_ssize_t n, Py_ssize_t start, Py_ssize_t stop,
                          Py_ssize_t data_len) {
    Py_ssize_t count = int64s(offsets, name);
    if (count < 0)
        return 0;
    if (count != n + 1) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd offsets for %zd records, not %zd", name, count, n, n + 1);
        return 0;
    }
    const int64_t *o = offsets->buf;
    for (Py_ssize_t i = start; i <= stop; i++) {
        if (o[i] < 0 || o[i] > data_len || (i > start && o[i] < o[i - 1])) {
            PyErr_Format(PyExc_ValueError, "%s[%zd] = %lld is not within [%lld, %zd]", name, i, (long long)o[i],
                         (long long)(i > start ? o[i - 1] : 0), data_len);
            return 0;
        }
    }
    return 1;
}

/* A validity argument: None (all valid), or one byte a record. */
static int validity_of(PyObject *obj, Py_buffer *view, const char *name, Py_ssize_t n) {
    if (obj == Py_None)
        return 1;
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return 0;
    if (view->len != n) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes for %zd records", name, view->len, n);
        return 0;
    }
    return 1;
}

#define VALID(bits, i) ((bits).buf == NULL || ((const uint8_t *)(bits).buf)[i])

/*
 * produce_rows(producer, topic, partition, offset header name, origin header name, origin, offsets int64,
 *              timestamps int64, key valid bool|None, key offsets int64, key data, value valid|None,
 *              value offsets, value data, header offsets int64, header data, start, stop)
 *   -> (records produced, error code)
 * Records [start, stop), each with its own headers, then the offset header, then the origin header with the
 * value origin unless its own headers hold one with a value, in order; stops at the first record librdkafka
 * refuses (error code non-zero, e.g. its queue is full) and says how many went. The values of those that went
 * stay in the caller's buffers, which it holds until the producer has none outstanding.
 */
static PyObject *produce_rows(PyObject *self, PyObject *args) {
    PyObject *producer;
    const char *topic, *offset_name, *origin_name;
    int partition;
    Py_ssize_t start, stop;
    Py_buffer origin, offsets, stamps, kvalid = {0}, koffs, kdata, vvalid = {0}, voffs, vdata, hoffs, hdata;
    PyObject *kvalid_obj, *vvalid_obj;
    if (!PyArg_ParseTuple(args, "Osissy*y*y*Oy*y*Oy*y*y*y*nn", &producer, &topic, &partition, &offset_name,
                          &origin_name, &origin, &offsets, &stamps, &kvalid_obj, &koffs, &kdata, &vvalid_obj, &voffs, &vdata, &hoffs, &hdata, &start,
                          &stop))
        return NULL;
    PyObject *result = NULL;
    rd_kafka_t *rk;
    Py_ssize_t n = int64s(&offsets, "offsets");
    if (n < 0 || !check_bound() || (rk = rk_of(producer, "producer")) == NULL)
        goto done;
    if (partition < 0) {
        PyErr_Format(PyExc_ValueError, "partition must be >= 0, got %d", partition);
        goto done;
    }
    if (offset_name[0] == '\0') {
        PyErr_SetString(PyExc_ValueError, "the offset header has no name");
        goto done;
    }
    if (origin_name[0] == '\0' || strcmp(origin_name, offset_name) == 0) {
        PyErr_SetString(PyExc_ValueError, "the origin header needs a name of its own");
        goto done;
    }
    if (start < 0 || start > stop || stop > n) {
        PyErr_Format(PyExc_ValueError, "records [%zd, %zd) are not within the %zd given", start, stop, n);
        goto done;
    }
    if (int64s(&stamps, "timestamps") != n) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "timestamps holds %zd items for %zd records", stamps.len / 8, n);
        goto done;
    }
    if (!validity_of(kvalid_obj, &kvalid, "key valid", n) || !validity_of(vvalid_obj, &vvalid, "value valid", n) ||
        !offsets_within(&koffs, "key offsets", n, start, stop, kdata.len) ||
        !offsets_within(&voffs, "value offsets", n, start, stop, vdata.len) ||
        !offsets_within(&hoffs, "header offsets", n, start, stop, hdata.len))
        goto done;
    const int64_t *off = offsets.buf, *ts = stamps.buf, *ko = koffs.buf, *vo = voffs.buf, *ho = hoffs.buf;
    const uint8_t *keys = kdata.buf, *values = vdata.buf, *headers = hdata.buf;
    rd_kafka_topic_t *rkt = rd.topic_new(rk, topic, NULL);
    if (rkt == NULL) {
        PyErr_Format(PyExc_RuntimeError, "no topic handle for %s", topic);
        goto done;
    }
    Py_ssize_t i = start;
    int err = 0;
    char number[24];
    size_t origin_len = strlen(origin_name);
    Py_BEGIN_ALLOW_THREADS
    for (; i < stop; i++) {
        rd_kafka_headers_t *hdrs = rd.headers_new(4);
        int has_origin = add_headers(hdrs, headers, (size_t)ho[i], (size_t)ho[i + 1], origin_name, origin_len);
        if (has_origin < 0) {
            rd.headers_destroy(hdrs);
            err = ERR_BAD_MSG;
            break;
        }
        int digits = snprintf(number, sizeof(number), "%lld", (long long)off[i]);
        rd.header_add(hdrs, offset_name, -1, number, digits);
        if (!has_origin)
            rd.header_add(hdrs, origin_name, -1, origin.buf, origin.len);
        const void *key = VALID(kvalid, i) ? keys + ko[i] : NULL;
        const void *value = VALID(vvalid, i) ? values + vo[i] : NULL;
        err = rd.producev(rk, V_RKT, rkt, V_PARTITION, (int32_t)partition, V_VALUE, value,
                          (size_t)(value ? vo[i + 1] - vo[i] : 0), V_KEY, key, (size_t)(key ? ko[i + 1] - ko[i] : 0),
                          V_TIMESTAMP, (int64_t)ts[i], V_HEADERS, hdrs, V_MSGFLAGS, 0, V_END);
        if (err) {
            rd.headers_destroy(hdrs); /* producev takes the headers only when it takes the record */
            break;
        }
    }
    Py_END_ALLOW_THREADS
    rd.topic_destroy(rkt);
    result = Py_BuildValue("(ni)", i - start, err);
done:
    PyBuffer_Release(&origin);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&stamps);
    if (kvalid.obj != NULL)
        PyBuffer_Release(&kvalid);
    PyBuffer_Release(&koffs);
    PyBuffer_Release(&kdata);
    if (vvalid.obj != NULL)
        PyBuffer_Release(&vvalid);
    PyBuffer_Release(&voffs);
    PyBuffer_Release(&vdata);
    PyBuffer_Release(&hoffs);
    PyBuffer_Release(&hdata);
    return result;
}

static PyObject *fatal_error(PyObject *self, PyObject *args) {
    PyObject *client;
    char text[512];
    rd_kafka_t *rk;
    if (!PyArg_ParseTuple(args, "O", &client) || !check_bound() || (rk = rk_of(client, "client")) == NULL)
        return NULL;
    int err = rd.fatal_error(rk, text, sizeof(text));
    if (err == 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(is)", err, text);
}

static PyMethodDef Fetcher_methods[] = {
    {"forward", (PyCFunction)Fetcher_forward, METH_VARARGS,
     "forward(topic, partition): the partition's fetched records come to this fetcher's queue."},
    {"fetch", (PyCFunction)Fetcher_fetch, METH_VARARGS, "fetch(max_records, timeout_ms, max_bytes): see the source."},
    {"close", (PyCFunction)Fetcher_close, METH_NOARGS, "Drop what is held and the queue, before the consumer closes."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FetcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streaming.kafka.native._rdkafka_columns.Fetcher",
    .tp_basicsize = sizeof(Fetcher),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Fetcher(consumer, capacity): a queue of fetched records read as column buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Fetcher_init,
    .tp_dealloc = (destructor)Fetcher_dealloc,
    .tp_methods = Fetcher_methods,
};

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_VARARGS, "bind(path): look librdkafka's functions up in the loaded library at path."},
    {"handle_name", handle_name, METH_VARARGS,
     "handle_name(client, type): the name (rd_kafka_name) of the handle a confluent-kafka client holds, None if "
     "not of that type (0 producer, 1 consumer) or closed."},
    {"produce_rows", produce_rows, METH_VARARGS, "produce_rows(...): see the source."},
    {"fatal_error", fatal_error, METH_VARARGS,
     "fatal_error(client): (code, text) of the client's fatal error (rd_kafka_fatal_error), or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rdkafka_columns", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__rdkafka_columns(void) {
    if (PyType_Ready(&FetcherType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&FetcherType);
    if (PyModule_AddObject(m, "Fetcher", (PyObject *)&FetcherType) < 0) {
        Py_DECREF(&FetcherType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
