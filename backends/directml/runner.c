/* dmlconform DirectML runner: one long-lived process that creates a D3D12 device and a DirectML
 * device, then serves cases over stdin/stdout until stdin closes.
 *
 * Frame (both directions, little endian): u32 magic 'DMLR', u32 json_length, u32 buffer_count,
 * the JSON text, then per buffer: u32 length and the bytes.
 * Requests: {"cmd":"info"} | {"cmd":"run", ...} | {"cmd":"batch","items":[run request, ..]} | {"cmd":"crash"} | {"cmd":"hang"}.
 * A run request: {"cmd":"run","op_type":N,"key":"...","exec_flags":F,
 *   "fields":[{"kind":"tensor","tensor":i} | {"kind":"float"|"uint"|"int","value":v} | {"kind":"struct","present":p,"members":[..]}
 *             | {"kind":"array","items":[..]} | {"kind":"tensors","items":[i,..]}
 *             | {"kind":"opdesc","present":p,"op_type":N,"fields":[..]} | {"kind":"union","hex":"16 hex digits"}
 *             | {"kind":"opdescs","items":[{"op_type":N,"fields":[..]},..]}],
 *   (opdesc: a fused activation, recursive; opdescs: an array of them, consecutive DML_OPERATOR_DESCs;
 *    union: a DML_SCALAR_UNION's 8 bytes inline)
 *   "tensors":[{"present":1,"role":"input"|"output","data_type":T,"flags":F,"sizes":[..],"strides":[..]|null,
 *               "total_bytes":B,"alignment":A,"buffer":k,"alias":j}]}   (alias: output bound to input tensor j)
 * Input buffers arrive in the order of the tensors that have "buffer" >= 0 (in a batch, "buffer" indexes
 * the frame's buffers, all items' together).
 * Replies: {"status":"ok","outputs":k,"t":{stage:seconds}} + one buffer per output tensor (aliased outputs: the input's resource);
 *          {"status":"rejected","stage":"CreateOperator","hr":"0x80070057"};
 *          {"status":"error","stage":S,"hr":H}; {"status":"device_removed","hr":H} (the runner then exits).
 * A batch reply: {"status":"ok","items":[one reply object per item]} + the outputs of its ok items, in order;
 * or one {"status":"device_removed",..} for the whole batch. Stage timings "t": create, compile,
 * initialize (first use of a descriptor), upload, execute (the batch's submit, shared evenly), readback.
 * Before each stage the runner writes "dmlrunner-stage NAME I/N" to stderr (where a hang is); on a
 * crash, "dmlrunner-crash exception CODE at ADDRESS", then it ends.
 * Command line: runner.exe DirectML.dll [--adapter N] [--warp] [--debug-layer] [--min-feature-level 0x1000]
 * Written for dmlconform; DirectML declarations are the public ABI (enum values, layouts, vtable slots).
 */
#define COBJMACROS
#define INITGUID
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <io.h>
#include <fcntl.h>
#include <dxgi1_4.h>
#include <d3d12.h>

/* ---------------- DirectML ABI subset ---------------- */
typedef struct { UINT DataType; UINT Flags; UINT DimensionCount; const UINT *Sizes; const UINT *Strides;
                 UINT64 TotalTensorSizeInBytes; UINT GuaranteedBaseOffsetAlignment; } DML_BUFFER_TENSOR_DESC;
typedef struct { UINT Type; const void *Desc; } DML_TENSOR_DESC;
typedef struct { UINT Type; const void *Desc; } DML_OPERATOR_DESC;
typedef struct { UINT RequestedFeatureLevelCount; const UINT *RequestedFeatureLevels; } DML_FEATURE_QUERY_FEATURE_LEVELS;
typedef struct { UINT MaxSupportedFeatureLevel; } DML_FEATURE_DATA_FEATURE_LEVELS;
typedef struct { UINT DataType; } DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT;
typedef struct { BOOL IsSupported; } DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT;
typedef struct { void *Dispatchable; D3D12_CPU_DESCRIPTOR_HANDLE CPUDescriptorHandle; D3D12_GPU_DESCRIPTOR_HANDLE GPUDescriptorHandle;
                 UINT SizeInDescriptors; } DML_BINDING_TABLE_DESC;
typedef struct { UINT RequiredDescriptorCount; UINT64 TemporaryResourceSize; UINT64 PersistentResourceSize; } DML_BINDING_PROPERTIES;
typedef struct { UINT Type; const void *Desc; } DML_BINDING_DESC;
typedef struct { ID3D12Resource *Buffer; UINT64 Offset; UINT64 SizeInBytes; } DML_BUFFER_BINDING;
typedef HRESULT (WINAPI *PFN_DMLCreateDevice)(ID3D12Device *, UINT, REFIID, void **);
typedef HRESULT (WINAPI *PFN_DMLCreateDevice1)(ID3D12Device *, UINT, UINT, REFIID, void **);
#define DML_TENSOR_TYPE_BUFFER 1
#define DML_BINDING_TYPE_NONE 0
#define DML_BINDING_TYPE_BUFFER 1
#define DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT 0
#define DML_FEATURE_FEATURE_LEVELS 1
#define DML_CREATE_DEVICE_FLAG_DEBUG 1

DEFINE_GUID(IID_IDMLDevice_,              0x6dbd6437,0x96fd,0x423f,0xa9,0x8c,0xae,0x5e,0x7c,0x2a,0x57,0x3f);
DEFINE_GUID(IID_IDMLOperator_,            0x26caae7a,0x3081,0x4633,0x95,0x81,0x22,0x6f,0xbe,0x57,0x69,0x5d);
DEFINE_GUID(IID_IDMLCompiledOperator_,    0x6b15e56a,0xbf5c,0x4902,0x92,0xd8,0xda,0x3a,0x65,0x0a,0xfe,0xa4);
DEFINE_GUID(IID_IDMLOperatorInitializer_, 0x427c1113,0x435c,0x469c,0x86,0x76,0x4d,0x5d,0xd0,0x72,0xf8,0x13);
DEFINE_GUID(IID_IDMLBindingTable_,        0x29c687dc,0xde74,0x4e3b,0xab,0x00,0x11,0x68,0xf2,0xfc,0x3c,0xfc);
DEFINE_GUID(IID_IDMLCommandRecorder_,     0xe6857a76,0x2e3e,0x4fdd,0xbf,0xf4,0x5d,0x2b,0xa1,0x0f,0xb4,0x53);

#define VT(o) (*(void ***)(o))
#define COM_RELEASE(o) do { if (o) ((ULONG (STDMETHODCALLTYPE *)(void *))VT(o)[2])(o); } while (0)
typedef HRESULT (STDMETHODCALLTYPE *fn_check)(void *, UINT, UINT, const void *, UINT, void *);
typedef HRESULT (STDMETHODCALLTYPE *fn_create_op)(void *, const DML_OPERATOR_DESC *, REFIID, void **);
typedef HRESULT (STDMETHODCALLTYPE *fn_compile)(void *, void *, UINT, REFIID, void **);
typedef HRESULT (STDMETHODCALLTYPE *fn_create_init)(void *, UINT, void *const *, REFIID, void **);
typedef HRESULT (STDMETHODCALLTYPE *fn_create_rec)(void *, REFIID, void **);
typedef HRESULT (STDMETHODCALLTYPE *fn_create_bt)(void *, const DML_BINDING_TABLE_DESC *, REFIID, void **);
typedef HRESULT (STDMETHODCALLTYPE *fn_removed)(void *);
typedef DML_BINDING_PROPERTIES *(STDMETHODCALLTYPE *fn_props)(void *, DML_BINDING_PROPERTIES *);
typedef void (STDMETHODCALLTYPE *fn_bind_n)(void *, UINT, const DML_BINDING_DESC *);
typedef void (STDMETHODCALLTYPE *fn_bind_1)(void *, const DML_BINDING_DESC *);
typedef HRESULT (STDMETHODCALLTYPE *fn_reset)(void *, const DML_BINDING_TABLE_DESC *);
typedef void (STDMETHODCALLTYPE *fn_record)(void *, ID3D12CommandList *, void *, void *);

/* ---------------- a small JSON reader (objects, arrays, numbers, strings, literals) ---------------- */
typedef enum { J_NULL, J_NUM, J_STR, J_ARR, J_OBJ, J_BOOL } jkind;
typedef struct jnode { jkind kind; double num; char *str; struct jnode **items; char **keys; int count; } jnode;
static const char *jp;
static void jskip(void) { while (*jp == ' ' || *jp == '\n' || *jp == '\t' || *jp == '\r') jp++; }
static jnode *jnew(jkind k) { jnode *n = calloc(1, sizeof *n); n->kind = k; return n; }
static char *jstring(void) {
    size_t cap = 16, len = 0; char *s = malloc(cap);
    jp++; /* opening quote */
    while (*jp && *jp != '"') {
        char c = *jp++;
        if (c == '\\' && *jp) { c = *jp++; if (c == 'n') c = '\n'; else if (c == 't') c = '\t'; else if (c == 'u') { jp += 4; c = '?'; } }
        if (len + 2 > cap) { cap *= 2; s = realloc(s, cap); }
        s[len++] = c;
    }
    if (*jp == '"') jp++;
    s[len] = 0; return s;
}
static jnode *jvalue(void) {
    jskip();
    if (*jp == '{' || *jp == '[') {
        int obj = *jp == '{'; jnode *n = jnew(obj ? J_OBJ : J_ARR); int cap = 8;
        n->items = malloc(cap * sizeof *n->items); if (obj) n->keys = malloc(cap * sizeof *n->keys);
        jp++; jskip();
        while (*jp && *jp != (obj ? '}' : ']')) {
            if (n->count == cap) { cap *= 2; n->items = realloc(n->items, cap * sizeof *n->items); if (obj) n->keys = realloc(n->keys, cap * sizeof *n->keys); }
            if (obj) { jskip(); n->keys[n->count] = jstring(); jskip(); if (*jp == ':') jp++; }
            n->items[n->count++] = jvalue(); jskip();
            if (*jp == ',') { jp++; jskip(); }
        }
        if (*jp) jp++;
        return n;
    }
    if (*jp == '"') { jnode *n = jnew(J_STR); n->str = jstring(); return n; }
    if (!strncmp(jp, "null", 4)) { jp += 4; return jnew(J_NULL); }
    if (!strncmp(jp, "true", 4)) { jnode *n = jnew(J_BOOL); n->num = 1; jp += 4; return n; }
    if (!strncmp(jp, "false", 5)) { jnode *n = jnew(J_BOOL); jp += 5; return n; }
    { jnode *n = jnew(J_NUM); char *end; n->num = strtod(jp, &end); if (end == jp) end++; jp = end; return n; }
}
static void jfree(jnode *n) {
    int i; if (!n) return;
    for (i = 0; i < n->count; i++) { jfree(n->items[i]); if (n->keys) free(n->keys[i]); }
    free(n->items); free(n->keys); free(n->str); free(n);
}
static jnode *jget(jnode *o, const char *key) {
    int i; if (!o || o->kind != J_OBJ) return NULL;
    for (i = 0; i < o->count; i++) if (!strcmp(o->keys[i], key)) return o->items[i];
    return NULL;
}
static double jnum(jnode *o, const char *key, double dflt) { jnode *n = jget(o, key); return n && (n->kind == J_NUM || n->kind == J_BOOL) ? n->num : dflt; }
static const char *jstr(jnode *o, const char *key) { jnode *n = jget(o, key); return n && n->kind == J_STR ? n->str : ""; }

/* ---------------- framing ---------------- */
#define MAGIC 0x524C4D44u /* "DMLR" */
static int read_all(void *p, size_t n) { unsigned char *b = p; while (n) { int r = _read(0, b, n > 1u << 30 ? 1u << 30 : (unsigned)n); if (r <= 0) return 0; b += r; n -= r; } return 1; }
static int write_all(const void *p, size_t n) { const unsigned char *b = p; while (n) { int w = _write(1, b, n > 1u << 30 ? 1u << 30 : (unsigned)n); if (w <= 0) return 0; b += w; n -= w; } return 1; }
typedef struct { unsigned char *data; UINT len; } blob;
static void reply(const char *json, int nbuf, const blob *bufs) {
    UINT h[3] = { MAGIC, (UINT)strlen(json), (UINT)nbuf }; int i;
    write_all(h, sizeof h); write_all(json, h[1]);
    for (i = 0; i < nbuf; i++) { write_all(&bufs[i].len, 4); write_all(bufs[i].data, bufs[i].len); }
}
static void replyf(const char *fmt, ...) { char buf[1024]; va_list a; va_start(a, fmt); vsnprintf(buf, sizeof buf, fmt, a); va_end(a); reply(buf, 0, NULL); }

/* ---------------- D3D12 / DirectML state ---------------- */
static ID3D12Device *dev; static ID3D12CommandQueue *queue; static ID3D12CommandAllocator *alloc;
static ID3D12GraphicsCommandList *cl; static ID3D12Fence *fence; static UINT64 fenceval; static HANDLE fence_event;
static void *dml, *recorder; static ID3D12DescriptorHeap *heap;
#define HEAP_DESCS 8192
#define MAX_BATCH 1024          /* cases in one "batch" request */
#define MAX_FRAME_BUFFERS 16384 /* input buffers in one frame */
static UINT heap_cursor, heap_increment; /* see make_binding_table */
static char adapter_name[256] = "unknown";

static HRESULT STDMETHODCALLTYPE no_meta_commands(void *self, UINT *num, void *descs) { (void)self; (void)descs; if (num) *num = 0; return S_OK; }
/* vkd3d exposes ID3D12Device5 with a stub EnumerateMetaCommands (E_NOTIMPL) that makes DMLCreateDevice fail:
 * give the device a copy of its vtable whose slot 59 reports zero meta commands. Used only when that happens. */
static void patch_meta_commands(ID3D12Device *d) {
    static void *vt[128]; void **old = *(void ***)d;
    memcpy(vt, old, 96 * sizeof(void *)); vt[59] = (void *)no_meta_commands; *(void ***)d = vt;
}

static ID3D12Resource *make_buffer(D3D12_HEAP_TYPE type, UINT64 size, D3D12_RESOURCE_FLAGS flags, D3D12_RESOURCE_STATES state) {
    D3D12_HEAP_PROPERTIES hp; D3D12_RESOURCE_DESC rd; ID3D12Resource *r = NULL;
    memset(&hp, 0, sizeof hp); hp.Type = type; memset(&rd, 0, sizeof rd);
    rd.Dimension = D3D12_RESOURCE_DIMENSION_BUFFER; rd.Width = size < 16 ? 16 : (size + 15) & ~15ull; rd.Height = 1; rd.DepthOrArraySize = 1;
    rd.MipLevels = 1; rd.SampleDesc.Count = 1; rd.Layout = D3D12_TEXTURE_LAYOUT_ROW_MAJOR; rd.Flags = flags;
    if (FAILED(ID3D12Device_CreateCommittedResource(dev, &hp, D3D12_HEAP_FLAG_NONE, &rd, state, NULL, &IID_ID3D12Resource, (void **)&r))) return NULL;
    return r;
}
static void barrier(ID3D12Resource *r, D3D12_RESOURCE_STATES a, D3D12_RESOURCE_STATES b) {
    D3D12_RESOURCE_BARRIER x; memset(&x, 0, sizeof x); x.Type = D3D12_RESOURCE_BARRIER_TYPE_TRANSITION;
    x.Transition.pResource = r; x.Transition.Subresource = D3D12_RESOURCE_BARRIER_ALL_SUBRESOURCES; x.Transition.StateBefore = a; x.Transition.StateAfter = b;
    ID3D12GraphicsCommandList_ResourceBarrier(cl, 1, &x);
}
static void uav_barrier(void) { D3D12_RESOURCE_BARRIER x; memset(&x, 0, sizeof x); x.Type = D3D12_RESOURCE_BARRIER_TYPE_UAV; ID3D12GraphicsCommandList_ResourceBarrier(cl, 1, &x); }
static HRESULT submit(void) {
    ID3D12CommandList *lists[1]; HRESULT hr = ID3D12GraphicsCommandList_Close(cl);
    if (FAILED(hr)) return hr;
    lists[0] = (ID3D12CommandList *)cl;
    ID3D12CommandQueue_ExecuteCommandLists(queue, 1, lists);
    ID3D12CommandQueue_Signal(queue, fence, ++fenceval);
    ID3D12Fence_SetEventOnCompletion(fence, fenceval, fence_event);
    if (WaitForSingleObject(fence_event, 120000) != WAIT_OBJECT_0) return E_FAIL;
    hr = ID3D12Device_GetDeviceRemovedReason(dev);
    ID3D12CommandAllocator_Reset(alloc);
    ID3D12GraphicsCommandList_Reset(cl, alloc, NULL);
    heap_cursor = 0; /* every binding table recorded so far has been used */
    return hr;
}

/* compiled-operator cache, keyed by the descriptor text the client sends */
typedef struct { char *key; void *compiled; ID3D12Resource *persistent; UINT64 persistent_size; unsigned request; } cached_op;
/* The cache keeps up to `cache_limit` operators (--cache-max, default 512) and evicts round-robin,
   but never an entry the current request uses: a batch's earlier case may have found its operator
   in the slot a later case would evict, and would then dispatch the later case's operator. A
   request with more distinct descriptors than the limit grows the cache up to CACHE_MAX. */
#define CACHE_MAX 1024
static cached_op cache[CACHE_MAX]; static int cache_count, cache_next, cache_limit = 512; static unsigned request_no;
static cached_op *cache_find(const char *key) {
    int i;
    for (i = 0; i < cache_count; i++) if (!strcmp(cache[i].key, key)) { cache[i].request = request_no; return &cache[i]; }
    return NULL;
}
/* A slot for a new operator: a free one, else the next one round-robin that this request does not
   use (its operator released), else NULL. */
static cached_op *cache_slot(void) {
    int k;
    if (cache_count < cache_limit) return &cache[cache_count++];
    for (k = 0; k < cache_count; k++) {
        cached_op *v = &cache[cache_next]; cache_next = (cache_next + 1) % cache_count;
        if (v->request == request_no) continue;
        COM_RELEASE(v->compiled); if (v->persistent) ID3D12Resource_Release(v->persistent); free(v->key);
        return v;
    }
    return cache_count < CACHE_MAX ? &cache[cache_count++] : NULL;
}

static int device_removed(void) { return FAILED(((fn_removed)VT(dml)[15])(dml)); }

/* ---------------- stages: timing and where a hang is ----------------
 * Each stage a case goes through is timed (QueryPerformanceCounter) and announced on stderr before
 * it begins ("dmlrunner-stage NAME I/N"), so that when the runner stops answering the client can say
 * which stage it hung in: creating, compiling or initializing the operator (once per descriptor),
 * uploading, executing (the batch's one submit and fence) or reading back. */
static LARGE_INTEGER qpf;
static double now_s(void) { LARGE_INTEGER c; QueryPerformanceCounter(&c); return (double)c.QuadPart / (double)qpf.QuadPart; }
/* A crash (an access violation in DirectML, e.g. a null tensor it dereferences) is said at once on
 * stderr and the process ends: left to Wine's own unhandled-exception path, a crashed runner took
 * 14 to 18 s to go on an NVIDIA H200 (the client waited for its pipes to close). */
static const char *crash_words(DWORD code) { /* as Wine's unhandled-exception message words them */
    switch (code) {
    case EXCEPTION_INT_DIVIDE_BY_ZERO: return "division by zero";
    case EXCEPTION_INT_OVERFLOW: return "overflow";
    case EXCEPTION_ARRAY_BOUNDS_EXCEEDED: return "array bounds";
    case EXCEPTION_ILLEGAL_INSTRUCTION: return "illegal instruction";
    case EXCEPTION_STACK_OVERFLOW: return "stack overflow";
    case EXCEPTION_PRIV_INSTRUCTION: return "privileged instruction";
    case EXCEPTION_DATATYPE_MISALIGNMENT: return "alignment";
    default: return NULL;
    }
}
static LONG WINAPI on_crash(EXCEPTION_POINTERS *e) {
    EXCEPTION_RECORD *r = e->ExceptionRecord; const char *words = crash_words(r->ExceptionCode);
    if (r->ExceptionCode == EXCEPTION_ACCESS_VIOLATION && r->NumberParameters >= 2)
        fprintf(stderr, "dmlrunner-crash page fault on %s access to %016llx at address %p\n",
                r->ExceptionInformation[0] == 0 ? "read" : r->ExceptionInformation[0] == 8 ? "execute" : "write",
                (unsigned long long)r->ExceptionInformation[1], r->ExceptionAddress);
    else if (words)
        fprintf(stderr, "dmlrunner-crash %s at address %p\n", words, r->ExceptionAddress);
    else
        fprintf(stderr, "dmlrunner-crash exception 0x%08lx at address %p\n", (unsigned long)r->ExceptionCode, r->ExceptionAddress);
    fflush(stderr);
    TerminateProcess(GetCurrentProcess(), 5);
    return EXCEPTION_EXECUTE_HANDLER;
}
static void announce(const char *stage, int item, int count) { fprintf(stderr, "dmlrunner-stage %s %d/%d\n", stage, item, count); fflush(stderr); }
enum { T_CREATE, T_COMPILE, T_INIT, T_UPLOAD, T_EXECUTE, T_READBACK, T_RELEASE, T_COUNT };
static const char *stage_names[T_COUNT] = { "create", "compile", "initialize", "upload", "execute", "readback", "release" };

/* heap_cursor: descriptors of the shader-visible heap in use by recorded, not yet completed work: each
   binding table of a batch gets its own range; the range is free again once a submit has completed */

#define MAXT 16
/* One request's tensors, as DirectML sees them (DML_BUFFER_TENSOR_DESC) and as the client sent them. */
typedef struct {
    int nt;
    DML_BUFFER_TENSOR_DESC bdesc[MAXT]; DML_TENSOR_DESC tdesc[MAXT]; UINT sizes[MAXT][16], strides[MAXT][16];
    int present[MAXT], is_output[MAXT], bufidx[MAXT], alias[MAXT];
} run_tensors;

/* The resources of one execution: a default-heap buffer per tensor (its own, so that an invalid case
   DirectML accepts cannot write into a neighbour's), and where each output's readback copy lands in
   the readback arena. */
typedef struct { ID3D12Resource *res[MAXT], *rbuf[MAXT]; UINT64 roff[MAXT]; int cls[MAXT]; void *bt; } run_resources;

/* ---------------- the default-buffer pool ----------------
 * Each tensor of a case has a default buffer of its own, but creating and releasing one is a driver
 * allocation and free each time (vkd3d: vkAllocateMemory, vkFreeMemory); on an NVIDIA H200 with 16
 * runners, a batch of 64 small cases spent a median 1.7 s outside every timed stage, where the
 * buffers were released. So buffers are kept between requests in free lists by power-of-two size
 * class (256 B and up), always left in the UNORDERED_ACCESS state, up to POOL_BYTES in all; a case
 * still never shares a buffer with another case of its request. A buffer whose case failed part-way
 * (its state unknown) is released, not pooled. */
#define POOL_CLASSES 32
#define POOL_PER_CLASS 128
#define POOL_BYTES (64ull << 20)
#define POOL_MAX_CLASS 24
static ID3D12Resource *pool[POOL_CLASSES][POOL_PER_CLASS]; static int pool_n[POOL_CLASSES]; static UINT64 pool_bytes;
static int pool_class(UINT64 n) { int k = 8; while (k < POOL_CLASSES - 1 && (1ull << k) < n) k++; return k; }

/* ---------------- arenas: upload and readback copies, and one scratch buffer ----------------
 * Creating a committed resource is a driver allocation (vkd3d: vkAllocateMemory); on an NVIDIA H200
 * with 16 runners the upload stage, three such allocations per tensor, was the largest part of a
 * catalogue's DirectML time. So a request's input copies are suballocated from one persistently
 * mapped upload buffer and its output copies from one readback buffer, both kept between requests
 * and grown (doubled) when a request needs more; the operators' temporary resources share one
 * scratch buffer (dispatches are separated by UAV barriers). Every submit of a request completes
 * before the request ends, so the arenas start empty at each request and what a request outgrew is
 * released at its end (`retired`). */
typedef struct { ID3D12Resource *buf; unsigned char *map; UINT64 cap, used; D3D12_HEAP_TYPE type; } arena;
static arena up_arena = { NULL, NULL, 0, 0, D3D12_HEAP_TYPE_UPLOAD }, rb_arena = { NULL, NULL, 0, 0, D3D12_HEAP_TYPE_READBACK };
static ID3D12Resource *scratch; static UINT64 scratch_cap;
#define RETIRED_MAX 256
static ID3D12Resource *retired[RETIRED_MAX]; static int retired_n;
static void retire(ID3D12Resource *r) {
    if (!r) return;
    if (retired_n < RETIRED_MAX) retired[retired_n++] = r;
    else ID3D12Resource_Release(r); /* cannot happen: a request grows each arena at most ~40 times */
}
static void release_retired(void) { while (retired_n) { ID3D12Resource *r = retired[--retired_n]; ID3D12Resource_Release(r); } }
/* n bytes at a 256-byte aligned offset of the arena; 0 when no buffer can be made. */
static int arena_alloc(arena *a, UINT64 n, ID3D12Resource **res, UINT64 *off) {
    UINT64 at = (a->used + 255) & ~255ull;
    if (!a->buf || at + n > a->cap) {
        UINT64 cap = a->cap ? a->cap * 2 : (1ull << 20); D3D12_RANGE none = { 0, 0 }; void *p = NULL;
        while (cap < n) cap *= 2;
        if (cap > (1ull << 32)) return 0;
        if (a->buf && a->map) ID3D12Resource_Unmap(a->buf, 0, NULL);
        retire(a->buf); a->buf = NULL; a->map = NULL; a->cap = 0;
        a->buf = make_buffer(a->type, cap, D3D12_RESOURCE_FLAG_NONE,
                             a->type == D3D12_HEAP_TYPE_UPLOAD ? D3D12_RESOURCE_STATE_GENERIC_READ : D3D12_RESOURCE_STATE_COPY_DEST);
        if (!a->buf) return 0;
        if (a->type == D3D12_HEAP_TYPE_UPLOAD) { /* written by the CPU only: mapped for good */
            if (FAILED(ID3D12Resource_Map(a->buf, 0, &none, &p))) { retire(a->buf); a->buf = NULL; return 0; }
            a->map = p;
        }
        a->cap = cap; at = 0;
    }
    *res = a->buf; *off = at; a->used = at + n;
    return 1;
}
/* The shared scratch buffer, at least n bytes (NULL when it cannot be made). */
static ID3D12Resource *scratch_for(UINT64 n) {
    if (n <= scratch_cap && scratch) return scratch;
    retire(scratch); scratch = make_buffer(D3D12_HEAP_TYPE_DEFAULT, n, D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS, D3D12_RESOURCE_STATE_UNORDERED_ACCESS);
    scratch_cap = scratch ? n : 0;
    return scratch;
}
static void arenas_start_request(void) { up_arena.used = 0; rb_arena.used = 0; }

/* Initialisers recorded into a batch's command list (not yet executed), released after its submit. */
#define PENDING_MAX CACHE_MAX
static void *pending_init[PENDING_MAX], *pending_bt[PENDING_MAX]; static int pending_n;
static void release_pending(void) { while (pending_n) { pending_n--; COM_RELEASE(pending_init[pending_n]); COM_RELEASE(pending_bt[pending_n]); } }

/* One case of a request: its tensors, compiled operator, resources, timings and, when it did not
   run, the JSON of its answer. */
typedef struct {
    jnode *req; run_tensors t; run_resources r; cached_op *c;
    int failed;            /* 1: `answer` holds its status (rejected, error, accepted_not_run) */
    int removed;           /* 1: the device was removed while this case was being prepared */
    char answer[200];
    double secs[T_COUNT];
} run_item;

static UINT64 padded_bytes(const run_tensors *t, int i) { return (t->bdesc[i].TotalTensorSizeInBytes + 3) & ~3ull; }

/* The request's tensors: descriptors with their Sizes/Strides arrays; 0 on a malformed request. */
static int read_tensors(jnode *req, run_tensors *t) {
    jnode *tensors = jget(req, "tensors"); int i, j;
    if (!tensors || tensors->count > MAXT) return 0;
    t->nt = tensors->count;
    for (i = 0; i < t->nt; i++) {
        jnode *x = tensors->items[i], *sz = jget(x, "sizes"), *st = jget(x, "strides");
        DML_BUFFER_TENSOR_DESC *b = &t->bdesc[i];
        t->present[i] = (int)jnum(x, "present", 0); t->is_output[i] = !strcmp(jstr(x, "role"), "output");
        t->bufidx[i] = (int)jnum(x, "buffer", -1); t->alias[i] = (int)jnum(x, "alias", -1);
        if (!t->present[i]) continue;
        memset(b, 0, sizeof *b);
        for (j = 0; j < 16; j++) { t->sizes[i][j] = 1; t->strides[i][j] = 0; }
        for (j = 0; sz && j < sz->count && j < 16; j++) t->sizes[i][j] = (UINT)sz->items[j]->num;
        for (j = 0; st && st->kind == J_ARR && j < st->count && j < 16; j++) t->strides[i][j] = (UINT)st->items[j]->num;
        b->DataType = (UINT)jnum(x, "data_type", 0); b->Flags = (UINT)jnum(x, "flags", 0);
        b->DimensionCount = (UINT)jnum(x, "dimension_count", sz ? sz->count : 0);
        b->Sizes = t->sizes[i]; b->Strides = (st && st->kind == J_ARR) ? t->strides[i] : NULL;
        b->TotalTensorSizeInBytes = (UINT64)jnum(x, "total_bytes", 0);
        b->GuaranteedBaseOffsetAlignment = (UINT)jnum(x, "alignment", 0);
        t->tdesc[i].Type = DML_TENSOR_TYPE_BUFFER; t->tdesc[i].Desc = b;
    }
    return 1;
}

/* One 4-byte scalar (FLOAT or UINT) of a field or struct member, at 4-byte alignment. */
static size_t pack_scalar(jnode *f, unsigned char *out, size_t off, size_t cap) {
    off = (off + 3) & ~(size_t)3; if (off + 4 > cap) return cap;
    if (!strcmp(jstr(f, "kind"), "float")) { float v = (float)jnum(f, "value", 0); memcpy(out + off, &v, 4); }
    else if (!strcmp(jstr(f, "kind"), "int")) { INT v = (INT)jnum(f, "value", 0); memcpy(out + off, &v, 4); }
    else { UINT v = (UINT)jnum(f, "value", 0); memcpy(out + off, &v, 4); }
    return off + 4;
}

#define MAX_ARRAYS 8
#define MAX_ARRAY_ITEMS 64
static unsigned char array_storage[MAX_ARRAYS][MAX_ARRAY_ITEMS * 4]; /* what array fields point to, per request */

#define MAX_STRUCTS 8
static unsigned char struct_storage[MAX_STRUCTS][64]; /* what struct-pointer fields point to, per request */

#define MAX_NESTED 12 /* a bidirectional LSTM's 6 activations, and room for more */
static unsigned char nested_storage[MAX_NESTED][256]; /* nested operator descs (fused activations), per request */
static DML_OPERATOR_DESC nested_ops[MAX_NESTED];

#define MAX_TENSOR_ARRAYS 4
static DML_TENSOR_DESC tensor_array_storage[MAX_TENSOR_ARRAYS][MAXT]; /* what tensor-array fields point to */

typedef struct { int nstruct, narray, nnested, ntensors; } pack_state;

static size_t put_pointer(unsigned char *out, size_t off, size_t cap, const void *p) {
    off = (off + 7) & ~(size_t)7; if (off + sizeof p > cap) return cap; memcpy(out + off, &p, sizeof p); return off + sizeof p;
}

/* A desc struct from its fields, in order: tensor, tensor-array, struct, array and operator-desc
   pointers (8-byte aligned) and 4-byte scalars. A struct field points at its members packed in
   struct_storage (NULL when absent); an array field at its items in array_storage (its count is a
   scalar field of its own); a tensor array at a copy of the named tensors' descs; an "opdesc" field
   (a fused activation) at a DML_OPERATOR_DESC whose Desc is packed from its own fields, recursively
   (a tensor index -1 there is a null tensor). Returns 0 when the storage is exhausted. */
static int pack_fields(jnode *fields, const run_tensors *t, unsigned char *out, size_t cap, pack_state *ps, int depth) {
    size_t off = 0; int i;
    memset(out, 0, cap);
    for (i = 0; fields && i < fields->count; i++) {
        jnode *f = fields->items[i]; const char *kind = jstr(f, "kind");
        if (!strcmp(kind, "struct")) {
            jnode *members = jget(f, "members"); const void *p = NULL; int j; size_t moff = 0;
            if ((int)jnum(f, "present", 0)) {
                unsigned char *dst; if (ps->nstruct >= MAX_STRUCTS) return 0;
                dst = struct_storage[ps->nstruct++]; memset(dst, 0, sizeof struct_storage[0]);
                for (j = 0; members && j < members->count; j++) moff = pack_scalar(members->items[j], dst, moff, sizeof struct_storage[0]);
                p = dst;
            }
            off = put_pointer(out, off, cap, p);
        } else if (!strcmp(kind, "array")) { /* a pointer to 4-byte items of one kind; NULL when empty */
            jnode *items = jget(f, "items"); const void *p = NULL; int j; size_t aoff = 0;
            if (items && items->count > 0) {
                unsigned char *dst; if (items->count > MAX_ARRAY_ITEMS || ps->narray >= MAX_ARRAYS) return 0;
                dst = array_storage[ps->narray++]; memset(dst, 0, sizeof array_storage[0]);
                for (j = 0; j < items->count; j++) aoff = pack_scalar(items->items[j], dst, aoff, sizeof array_storage[0]);
                p = dst;
            }
            off = put_pointer(out, off, cap, p);
        } else if (!strcmp(kind, "tensors")) { /* a pointer to consecutive DML_TENSOR_DESCs; NULL when empty */
            jnode *items = jget(f, "items"); const void *p = NULL; int j;
            if (items && items->count > 0) {
                DML_TENSOR_DESC *dst; if (items->count > MAXT || ps->ntensors >= MAX_TENSOR_ARRAYS) return 0;
                dst = tensor_array_storage[ps->ntensors++];
                for (j = 0; j < items->count; j++) {
                    int ti = (int)items->items[j]->num;
                    if (ti < 0 || ti >= t->nt || !t->present[ti]) return 0;
                    dst[j] = t->tdesc[ti];
                }
                p = dst;
            }
            off = put_pointer(out, off, cap, p);
        } else if (!strcmp(kind, "opdesc")) { /* a fused activation: DML_OPERATOR_DESC {Type, Desc}, or NULL */
            const void *p = NULL;
            if ((int)jnum(f, "present", 0)) {
                int k; if (ps->nnested >= MAX_NESTED || depth >= 2) return 0;
                k = ps->nnested++;
                if (!pack_fields(jget(f, "fields"), t, nested_storage[k], sizeof nested_storage[0], ps, depth + 1)) return 0;
                nested_ops[k].Type = (UINT)jnum(f, "op_type", 0); nested_ops[k].Desc = nested_storage[k];
                p = &nested_ops[k];
            }
            off = put_pointer(out, off, cap, p);
        } else if (!strcmp(kind, "opdescs")) { /* an array of fused activations: consecutive DML_OPERATOR_DESCs, or NULL */
            jnode *items = jget(f, "items"); const void *p = NULL; int j, k0;
            if (items && items->count > 0) {
                if (ps->nnested + items->count > MAX_NESTED || depth >= 2) return 0;
                k0 = ps->nnested; ps->nnested += items->count;
                for (j = 0; j < items->count; j++) {
                    if (!pack_fields(jget(items->items[j], "fields"), t, nested_storage[k0 + j], sizeof nested_storage[0], ps, depth + 1)) return 0;
                    nested_ops[k0 + j].Type = (UINT)jnum(items->items[j], "op_type", 0); nested_ops[k0 + j].Desc = nested_storage[k0 + j];
                }
                p = &nested_ops[k0];
            }
            off = put_pointer(out, off, cap, p);
        } else if (!strcmp(kind, "union")) { /* DML_SCALAR_UNION: 8 bytes inline, 8-byte aligned, from 16 hex digits */
            const char *hex = jstr(f, "hex"); int j; unsigned v;
            off = (off + 7) & ~(size_t)7; if (off + 8 > cap || strlen(hex) != 16) return 0;
            for (j = 0; j < 8; j++) { if (sscanf(hex + 2 * j, "%2x", &v) != 1) return 0; out[off + j] = (unsigned char)v; }
            off += 8;
        } else if (!strcmp(kind, "tensor")) {
            int ti = (int)jnum(f, "tensor", -1); const DML_TENSOR_DESC *p = (ti >= 0 && ti < t->nt && t->present[ti]) ? &t->tdesc[ti] : NULL;
            off = put_pointer(out, off, cap, p);
        } else {
            off = pack_scalar(f, out, off, cap);
        }
        if (off >= cap) return 0;
    }
    return 1;
}

/* The operator's desc struct; 0 when the request does not fit the runner's storage. */
static int pack_desc(jnode *req, const run_tensors *t, unsigned char *opdesc, size_t cap) {
    pack_state ps = {0, 0, 0, 0};
    return pack_fields(jget(req, "fields"), t, opdesc, cap, &ps, 0);
}

/* A binding table over the next free range of the heap (RequiredDescriptorCount descriptors). The
   caller submits first when the heap is full (heap_room). */
static HRESULT make_binding_table(void *dispatchable, UINT count, void **bt) {
    DML_BINDING_TABLE_DESC btd; D3D12_CPU_DESCRIPTOR_HANDLE cpu; D3D12_GPU_DESCRIPTOR_HANDLE gpu;
    if (count == 0) count = 1;
    heap->lpVtbl->GetCPUDescriptorHandleForHeapStart(heap, &cpu);
    heap->lpVtbl->GetGPUDescriptorHandleForHeapStart(heap, &gpu);
    cpu.ptr += (SIZE_T)heap_cursor * heap_increment; gpu.ptr += (UINT64)heap_cursor * heap_increment;
    btd.Dispatchable = dispatchable; btd.CPUDescriptorHandle = cpu; btd.GPUDescriptorHandle = gpu; btd.SizeInDescriptors = count;
    heap_cursor += count;
    return ((fn_create_bt)VT(dml)[12])(dml, &btd, &IID_IDMLBindingTable_, bt);
}
static int heap_room(UINT count) { return heap_cursor + (count ? count : 1) <= HEAP_DESCS; }

static void item_fail(run_item *it, const char *status, const char *stage, HRESULT hr) {
    it->failed = 1;
    snprintf(it->answer, sizeof it->answer, "{\"status\":\"%s\",\"stage\":\"%s\",\"hr\":\"0x%08lx\"", status, stage, (unsigned long)hr);
}
static void item_fail_text(run_item *it, const char *status, const char *stage, const char *why) {
    it->failed = 1;
    snprintf(it->answer, sizeof it->answer, "{\"status\":\"%s\",\"stage\":\"%s\",\"hr\":\"%s\"", status, stage, why);
}

/* Create, compile and initialise the case's operator, or find it compiled in the cache. On failure
   the item holds its answer (rejected, error) and `removed` says whether the device went away.
   `deferred` (a batch of several cases): the initialiser is recorded into the command list, ahead of
   every dispatch of the batch and separated from them by a UAV barrier, and runs in the batch's one
   submit (a fence per new descriptor was most of the initialize stage on a GPU shared by 16
   runners); a hang there is then reported at execute. Otherwise (one case: the hang census) it is
   submitted at once, so that a hang is reported at initialize. Call this before anything of the
   batch but other initialisers is recorded. */
static void compile_item(run_item *it, const unsigned char *opdesc, int index, int count, int deferred) {
    jnode *req = it->req; const char *key = jstr(req, "key"); cached_op *c = *key ? cache_find(key) : NULL;
    void *op = NULL, *compiled = NULL, *init = NULL, *bt = NULL; ID3D12Resource *tmp = NULL;
    DML_BINDING_PROPERTIES ep, ip; DML_OPERATOR_DESC od; HRESULT hr; double t0;
    if (c) { it->c = c; return; }
    announce("create", index, count); t0 = now_s();
    od.Type = (UINT)jnum(req, "op_type", 0); od.Desc = opdesc;
    hr = ((fn_create_op)VT(dml)[8])(dml, &od, &IID_IDMLOperator_, &op);
    it->secs[T_CREATE] = now_s() - t0;
    if (FAILED(hr)) {
        if (device_removed()) { item_fail(it, "device_removed", "CreateOperator", hr); it->removed = 1; return; }
        item_fail(it, "rejected", "CreateOperator", hr); return;
    }
    announce("compile", index, count); t0 = now_s();
    if (!strcmp(jstr(req, "test_hang"), "compile")) Sleep(INFINITE); /* test hook: a driver that never finishes compiling */
    hr = ((fn_compile)VT(dml)[9])(dml, op, (UINT)jnum(req, "exec_flags", 0), &IID_IDMLCompiledOperator_, &compiled);
    it->secs[T_COMPILE] = now_s() - t0;
    COM_RELEASE(op);
    if (FAILED(hr)) { item_fail(it, "error", "CompileOperator", hr); it->removed = device_removed(); return; }
    /* initialise once: the persistent resource lives with the cache entry */
    announce("initialize", index, count); t0 = now_s();
    hr = ((fn_create_init)VT(dml)[10])(dml, 1, &compiled, &IID_IDMLOperatorInitializer_, &init);
    if (FAILED(hr)) { COM_RELEASE(compiled); item_fail(it, "error", "CreateOperatorInitializer", hr); return; }
    ((fn_props)VT(init)[8])(init, &ip); ((fn_props)VT(compiled)[8])(compiled, &ep);
    c = cache_slot();
    if (!c) { COM_RELEASE(init); COM_RELEASE(compiled); item_fail_text(it, "error", "cache", "more distinct descriptors in one request than the runner's cache holds"); return; }
    memset(c, 0, sizeof *c); c->key = _strdup(*key ? key : "?"); c->compiled = compiled; c->request = request_no;
    c->persistent_size = ep.PersistentResourceSize;
    if (ep.PersistentResourceSize)
        c->persistent = make_buffer(D3D12_HEAP_TYPE_DEFAULT, ep.PersistentResourceSize, D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS, D3D12_RESOURCE_STATE_UNORDERED_ACCESS);
    if (!heap_room(ip.RequiredDescriptorCount) && pending_n) { /* the heap is full of this batch's initialisers: run them */
        hr = submit(); release_pending();
        if (FAILED(hr)) { COM_RELEASE(init); item_fail(it, "device_removed", "initialize", hr); it->removed = 1; return; }
    }
    if (ip.TemporaryResourceSize) tmp = scratch_for(ip.TemporaryResourceSize);
    hr = make_binding_table(init, ip.RequiredDescriptorCount, &bt);
    if (FAILED(hr)) { COM_RELEASE(init); item_fail(it, "error", "CreateBindingTable", hr); return; }
    ID3D12GraphicsCommandList_SetDescriptorHeaps(cl, 1, &heap);
    if (tmp) { DML_BUFFER_BINDING b = { tmp, 0, ip.TemporaryResourceSize }; DML_BINDING_DESC d = { DML_BINDING_TYPE_BUFFER, &b }; ((fn_bind_1)VT(bt)[10])(bt, &d); }
    if (c->persistent) { DML_BUFFER_BINDING b = { c->persistent, 0, c->persistent_size }; DML_BINDING_DESC d = { DML_BINDING_TYPE_BUFFER, &b }; ((fn_bind_n)VT(bt)[9])(bt, 1, &d); }
    ((fn_record)VT(recorder)[8])(recorder, (ID3D12CommandList *)cl, init, bt);
    if (deferred && pending_n < PENDING_MAX) {
        uav_barrier(); /* the persistent resource is written before any dispatch reads it */
        pending_init[pending_n] = init; pending_bt[pending_n] = bt; pending_n++;
        it->secs[T_INIT] = now_s() - t0;
        it->c = c;
        return;
    }
    hr = submit();
    COM_RELEASE(init); COM_RELEASE(bt);
    it->secs[T_INIT] = now_s() - t0;
    if (FAILED(hr)) { item_fail(it, "device_removed", "initialize", hr); it->removed = 1; return; }
    it->c = c;
}

static void reset_command_list(void) {
    ID3D12GraphicsCommandList_Close(cl); ID3D12CommandAllocator_Reset(alloc); ID3D12GraphicsCommandList_Reset(cl, alloc, NULL);
    heap_cursor = 0;
}

/* One default-heap resource per present tensor (an aliased output shares its input's), inputs
   copied in through upload buffers. 0 when a buffer cannot be made. */
static int upload_inputs(const run_tensors *t, blob *inbufs, int ninbufs, run_resources *r) {
    int i;
    for (i = 0; i < t->nt; i++) {
        UINT64 n, off; unsigned char *p; ID3D12Resource *up; blob *src;
        if (!t->present[i] || (t->is_output[i] && t->alias[i] >= 0)) continue;
        n = padded_bytes(t, i);
        if (n > (1ull << 31)) return 0;
        r->cls[i] = pool_class(n);
        r->res[i] = pool_n[r->cls[i]] ? pool[r->cls[i]][--pool_n[r->cls[i]]] : NULL;
        if (r->res[i]) pool_bytes -= 1ull << r->cls[i];
        else r->res[i] = make_buffer(D3D12_HEAP_TYPE_DEFAULT, 1ull << r->cls[i], D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS, D3D12_RESOURCE_STATE_UNORDERED_ACCESS);
        if (!r->res[i]) return 0;
        /* inputs get their bytes, outputs zeros (a pooled buffer holds an earlier case's): the same
           bytes whatever ran before */
        src = (!t->is_output[i] && t->bufidx[i] >= 0 && t->bufidx[i] < ninbufs) ? &inbufs[t->bufidx[i]] : NULL;
        if (!arena_alloc(&up_arena, n, &up, &off)) return 0;
        p = up_arena.map + off; memset(p, 0, n);
        if (src) memcpy(p, src->data, src->len < n ? src->len : n);
        barrier(r->res[i], D3D12_RESOURCE_STATE_UNORDERED_ACCESS, D3D12_RESOURCE_STATE_COPY_DEST);
        ID3D12GraphicsCommandList_CopyBufferRegion(cl, r->res[i], 0, up, off, n);
        barrier(r->res[i], D3D12_RESOURCE_STATE_COPY_DEST, D3D12_RESOURCE_STATE_UNORDERED_ACCESS);
    }
    return 1;
}

/* Bind inputs and outputs (absent tensors as DML_BINDING_TYPE_NONE), record the dispatch and the
   copies into readback buffers; the caller submits (once for the whole batch). */
static HRESULT record_dispatch(jnode *req, const run_tensors *t, cached_op *c, run_resources *r) {
    DML_BUFFER_BINDING bb[MAXT]; DML_BINDING_DESC in_b[MAXT], out_b[MAXT]; int nin = 0, nout = 0, i;
    DML_BINDING_PROPERTIES ep; HRESULT hr; void *compiled = c->compiled; ID3D12Resource *tmp = NULL;
    ((fn_props)VT(compiled)[8])(compiled, &ep);
    for (i = 0; i < t->nt; i++) {
        DML_BINDING_DESC *d = t->is_output[i] ? &out_b[nout++] : &in_b[nin++];
        if (!t->present[i]) { d->Type = DML_BINDING_TYPE_NONE; d->Desc = NULL; continue; }
        bb[i].Buffer = (t->is_output[i] && t->alias[i] >= 0) ? r->res[t->alias[i]] : r->res[i];
        bb[i].Offset = 0; bb[i].SizeInBytes = padded_bytes(t, i);
        d->Type = DML_BINDING_TYPE_BUFFER; d->Desc = &bb[i];
    }
    if ((int)jnum(req, "drop_binding", 0)) nin = nin > 0 ? nin - 1 : 0; /* test hook: a wrong binding count removes the device */
    if (ep.TemporaryResourceSize) { tmp = scratch_for(ep.TemporaryResourceSize); if (!tmp) return E_OUTOFMEMORY; }
    hr = make_binding_table(compiled, ep.RequiredDescriptorCount, &r->bt);
    if (FAILED(hr)) return hr;
    ID3D12GraphicsCommandList_SetDescriptorHeaps(cl, 1, &heap);
    ((fn_bind_n)VT(r->bt)[8])(r->bt, nin, in_b);
    ((fn_bind_n)VT(r->bt)[9])(r->bt, nout, out_b);
    if (tmp) { DML_BUFFER_BINDING b = { tmp, 0, ep.TemporaryResourceSize }; DML_BINDING_DESC d = { DML_BINDING_TYPE_BUFFER, &b }; ((fn_bind_1)VT(r->bt)[10])(r->bt, &d); }
    if (c->persistent) { DML_BUFFER_BINDING b = { c->persistent, 0, c->persistent_size }; DML_BINDING_DESC d = { DML_BINDING_TYPE_BUFFER, &b }; ((fn_bind_1)VT(r->bt)[11])(r->bt, &d); }
    ((fn_record)VT(recorder)[8])(recorder, (ID3D12CommandList *)cl, compiled, r->bt);
    uav_barrier();
    for (i = 0; i < t->nt; i++) {
        ID3D12Resource *res; UINT64 n;
        if (!t->present[i] || !t->is_output[i]) continue;
        res = t->alias[i] >= 0 ? r->res[t->alias[i]] : r->res[i]; n = padded_bytes(t, i);
        if (!arena_alloc(&rb_arena, n, &r->rbuf[i], &r->roff[i])) return E_OUTOFMEMORY;
        barrier(res, D3D12_RESOURCE_STATE_UNORDERED_ACCESS, D3D12_RESOURCE_STATE_COPY_SOURCE);
        ID3D12GraphicsCommandList_CopyBufferRegion(cl, r->rbuf[i], r->roff[i], res, 0, n);
        barrier(res, D3D12_RESOURCE_STATE_COPY_SOURCE, D3D12_RESOURCE_STATE_UNORDERED_ACCESS);
    }
    return S_OK;
}

/* Every output's bytes (its TotalTensorSizeInBytes), read from the readback buffers into `outs`. */
static int read_outputs(const run_tensors *t, run_resources *r, blob *outs) {
    int nouts = 0, i;
    for (i = 0; i < t->nt; i++) {
        void *p; UINT64 n; D3D12_RANGE rr;
        if (!t->present[i] || !t->is_output[i] || !r->rbuf[i]) continue;
        n = t->bdesc[i].TotalTensorSizeInBytes; rr.Begin = (SIZE_T)r->roff[i]; rr.End = (SIZE_T)(r->roff[i] + n);
        outs[nouts].data = malloc(n ? n : 1); outs[nouts].len = (UINT)n;
        ID3D12Resource_Map(r->rbuf[i], 0, &rr, &p); memcpy(outs[nouts].data, (unsigned char *)p + r->roff[i], n);
        ID3D12Resource_Unmap(r->rbuf[i], 0, NULL);
        nouts++;
    }
    return nouts;
}

/* The case's binding table released and its buffers back to the pool (`reuse`: its commands were
   recorded whole, so every buffer is in the UNORDERED_ACCESS state), or released. */
static void release_resources(const run_tensors *t, run_resources *r, int reuse) {
    int i;
    COM_RELEASE(r->bt);
    for (i = 0; i < t->nt; i++) {
        int k = r->cls[i]; if (!r->res[i]) continue;
        if (reuse && k <= POOL_MAX_CLASS && pool_n[k] < POOL_PER_CLASS && pool_bytes + (1ull << k) <= POOL_BYTES) { pool[k][pool_n[k]++] = r->res[i]; pool_bytes += 1ull << k; }
        else ID3D12Resource_Release(r->res[i]);
        r->res[i] = NULL;
    }
}

/* A growing text buffer for a reply's JSON. */
typedef struct { char *s; size_t len, cap; } text;
static void tput(text *b, const char *fmt, ...) {
    va_list a; int n;
    for (;;) {
        va_start(a, fmt); n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, a); va_end(a);
        if (n >= 0 && (size_t)n < b->cap - b->len) { b->len += (size_t)n; return; }
        b->cap = b->cap * 2 + (n > 0 ? (size_t)n : 256); b->s = realloc(b->s, b->cap);
    }
}
static void put_timings(text *b, const double *secs) {
    int k, first = 1; tput(b, ",\"t\":{");
    for (k = 0; k < T_COUNT; k++) if (secs[k] > 0) { tput(b, "%s\"%s\":%.6f", first ? "" : ",", stage_names[k], secs[k]); first = 0; }
    tput(b, "}");
}

/* Run the cases of a request: each distinct descriptor created, compiled and initialised once (the
   cache), then every case's inputs uploaded and its dispatch and readback copies recorded into one
   command list, one submit and one fence for all (a submit more only when the descriptor heap is
   full), and the outputs read back together. `single`: a "run" request (one case, its own reply
   shape); otherwise a "batch" reply: {"status":"ok","items":[{"status":..,"outputs":k,"t":{..}},..]}
   with the outputs of every ok item in order. Returns -1 when the device is gone (the runner then
   exits and the client, which cannot tell which case removed it, runs the cases again one by one). */
static int run_items(jnode **reqs, int count, blob *inbufs, int ninbufs, int single) {
    run_item *items = calloc((size_t)(count ? count : 1), sizeof *items);
    unsigned char opdesc[256]; int i, k, nouts = 0, removed = 0, recorded = 0; HRESULT hr = S_OK; double t0, shared;
    blob *outs; text b = { malloc(256), 0, 256 };
    request_no++; /* the cache entries this request finds or makes are not evicted before it ends */
    arenas_start_request();
    for (i = 0; i < count; i++) {
        run_item *it = &items[i]; it->req = reqs[i];
        if (!read_tensors(it->req, &it->t)) { item_fail_text(it, "error", "request", "bad tensors"); continue; }
        if (!pack_desc(it->req, &it->t, opdesc, sizeof opdesc)) { item_fail_text(it, "error", "request", "desc does not fit the runner's storage"); continue; }
        compile_item(it, opdesc, i + 1, count, count > 1);
        if (it->removed) { removed = 1; break; }
    }
    recorded = pending_n; /* initialisers recorded ahead of the dispatches: work the next submit must run */
    if (!removed) {
        announce("upload", count, count);
        for (i = 0; i < count && SUCCEEDED(hr); i++) {
            run_item *it = &items[i]; DML_BINDING_PROPERTIES ep;
            if (it->failed) continue;
            ((fn_props)VT(it->c->compiled)[8])(it->c->compiled, &ep);
            if (!heap_room(ep.RequiredDescriptorCount) && recorded) { hr = submit(); recorded = 0; release_pending(); if (FAILED(hr)) break; }
            t0 = now_s();
            if (!upload_inputs(&it->t, inbufs, ninbufs, &it->r)) {
                /* the operator was accepted but its buffers cannot be made (an invalid case DirectML accepted) */
                it->failed = 1; snprintf(it->answer, sizeof it->answer, "{\"status\":\"accepted_not_run\",\"stage\":\"allocate\"");
                if (!recorded) reset_command_list();
                else { hr = submit(); recorded = 0; release_pending(); }
                continue;
            }
            hr = record_dispatch(it->req, &it->t, it->c, &it->r);
            if (FAILED(hr)) { item_fail(it, "error", "CreateBindingTable", hr); hr = submit(); recorded = 0; release_pending(); continue; } /* its uploads and the earlier cases' work */
            it->secs[T_UPLOAD] = now_s() - t0;
            recorded++;
        }
        if (SUCCEEDED(hr)) {
            announce("execute", count, count); t0 = now_s();
            for (i = 0; i < count; i++) if (!strcmp(jstr(items[i].req, "test_hang"), "execute")) Sleep(INFINITE); /* test hook: a GPU hang */
            hr = submit(); release_pending();
            shared = (now_s() - t0) / (count ? count : 1);
            for (i = 0; i < count; i++) if (!items[i].failed) items[i].secs[T_EXECUTE] = shared;
        }
        if (SUCCEEDED(hr) && device_removed()) hr = ((fn_removed)VT(dml)[15])(dml);
        if (FAILED(hr)) removed = 1;
    }
    if (removed) {
        const char *stage = "execute";
        for (i = 0; i < count; i++) if (items[i].removed) stage = strstr(items[i].answer, "initialize") ? "initialize" : strstr(items[i].answer, "Compile") ? "CompileOperator" : "CreateOperator";
        replyf("{\"status\":\"device_removed\",\"stage\":\"%s\",\"hr\":\"0x%08lx\",\"count\":%d}", stage, (unsigned long)hr, count);
        for (i = 0; i < count; i++) release_resources(&items[i].t, &items[i].r, 0);
        release_pending(); release_retired();
        free(items); free(b.s); return -1;
    }
    announce("readback", count, count);
    outs = malloc(sizeof *outs * (size_t)(count * MAXT + 1));
    tput(&b, single ? "" : "{\"status\":\"ok\",\"items\":[");
    for (i = 0; i < count; i++) {
        run_item *it = &items[i]; int n = 0;
        if (!it->failed) { t0 = now_s(); n = read_outputs(&it->t, &it->r, outs + nouts); it->secs[T_READBACK] = now_s() - t0; nouts += n; }
        tput(&b, "%s", i ? "," : "");
        if (it->failed) tput(&b, "%s", it->answer); else tput(&b, "{\"status\":\"ok\",\"outputs\":%d", n);
        t0 = now_s(); release_resources(&it->t, &it->r, !it->failed); it->secs[T_RELEASE] = now_s() - t0;
        put_timings(&b, it->secs); tput(&b, "}");
    }
    if (!single) tput(&b, "]}");
    release_retired(); /* every submit of the request has completed */
    reply(b.s, nouts, outs);
    for (k = 0; k < nouts; k++) free(outs[k].data);
    free(outs); free(items); free(b.s);
    return 0;
}

static void do_info(void) {
    static const UINT levels[] = { 0x1000, 0x2000, 0x2100, 0x3000, 0x3100, 0x4000, 0x4100, 0x5000, 0x5100, 0x5200,
                                   0x6000, 0x6100, 0x6200, 0x6300, 0x6400 };
    DML_FEATURE_QUERY_FEATURE_LEVELS q = { sizeof levels / sizeof levels[0], levels }; DML_FEATURE_DATA_FEATURE_LEVELS fl = { 0 };
    char json[2048]; int n, t; HRESULT hr = ((fn_check)VT(dml)[7])(dml, DML_FEATURE_FEATURE_LEVELS, sizeof q, &q, sizeof fl, &fl);
    n = snprintf(json, sizeof json, "{\"status\":\"ok\",\"adapter\":\"%s\",\"max_feature_level\":%u,\"feature_level_hr\":\"0x%08lx\",\"types\":{",
                 adapter_name, fl.MaxSupportedFeatureLevel, (unsigned long)hr);
    for (t = 1; t <= 13; t++) {
        DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT tq = { (UINT)t }; DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT td = { 0 };
        HRESULT h = ((fn_check)VT(dml)[7])(dml, DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT, sizeof tq, &tq, sizeof td, &td);
        n += snprintf(json + n, sizeof json - n, "%s\"%d\":%d", t > 1 ? "," : "", t, SUCCEEDED(h) && td.IsSupported ? 1 : 0);
    }
    snprintf(json + n, sizeof json - n, "}}");
    reply(json, 0, NULL);
}

static int setup(const char *dllpath, int adapter_index, int warp, int debug_layer, UINT min_level) {
    IDXGIFactory4 *factory = NULL; IDXGIAdapter1 *adapter = NULL; HMODULE h; HRESULT hr;
    D3D12_COMMAND_QUEUE_DESC qd; D3D12_DESCRIPTOR_HEAP_DESC hd; PFN_DMLCreateDevice1 create1; PFN_DMLCreateDevice create0;
    if (SUCCEEDED(CreateDXGIFactory1(&IID_IDXGIFactory4, (void **)&factory))) {
        if (warp) IDXGIFactory4_EnumWarpAdapter(factory, &IID_IDXGIAdapter1, (void **)&adapter);
        else IDXGIFactory4_EnumAdapters1(factory, (UINT)adapter_index, &adapter);
        if (adapter) { DXGI_ADAPTER_DESC1 d; if (SUCCEEDED(IDXGIAdapter1_GetDesc1(adapter, &d))) WideCharToMultiByte(CP_UTF8, 0, d.Description, -1, adapter_name, sizeof adapter_name - 1, NULL, NULL); }
    }
    for (char *p = adapter_name; *p; p++) if (*p == '"' || *p == '\\') *p = ' ';
    hr = D3D12CreateDevice((IUnknown *)adapter, D3D_FEATURE_LEVEL_11_0, &IID_ID3D12Device, (void **)&dev);
    if (FAILED(hr)) { fprintf(stderr, "runner: D3D12CreateDevice hr=0x%08lx\n", (unsigned long)hr); return 0; }
    h = LoadLibraryA(dllpath);
    if (!h) { fprintf(stderr, "runner: LoadLibrary(%s) failed (%lu)\n", dllpath, GetLastError()); return 0; }
    create1 = (PFN_DMLCreateDevice1)GetProcAddress(h, "DMLCreateDevice1");
    create0 = (PFN_DMLCreateDevice)GetProcAddress(h, "DMLCreateDevice");
    hr = create1 ? create1(dev, debug_layer ? DML_CREATE_DEVICE_FLAG_DEBUG : 0, min_level, &IID_IDMLDevice_, &dml)
                 : create0(dev, debug_layer ? DML_CREATE_DEVICE_FLAG_DEBUG : 0, &IID_IDMLDevice_, &dml);
    if (FAILED(hr) && hr != (HRESULT)0x887A0004) { /* not DXGI_ERROR_UNSUPPORTED: try the vkd3d meta-command work-around */
        patch_meta_commands(dev);
        hr = create1 ? create1(dev, debug_layer ? DML_CREATE_DEVICE_FLAG_DEBUG : 0, min_level, &IID_IDMLDevice_, &dml)
                     : create0(dev, debug_layer ? DML_CREATE_DEVICE_FLAG_DEBUG : 0, &IID_IDMLDevice_, &dml);
    }
    if (FAILED(hr)) { fprintf(stderr, "runner: DMLCreateDevice hr=0x%08lx%s\n", (unsigned long)hr, debug_layer ? " (debug layer requested: is DirectMLDebug.dll present?)" : ""); return 0; }
    memset(&qd, 0, sizeof qd); qd.Type = D3D12_COMMAND_LIST_TYPE_DIRECT;
    if (FAILED(ID3D12Device_CreateCommandQueue(dev, &qd, &IID_ID3D12CommandQueue, (void **)&queue))) return 0;
    if (FAILED(ID3D12Device_CreateCommandAllocator(dev, D3D12_COMMAND_LIST_TYPE_DIRECT, &IID_ID3D12CommandAllocator, (void **)&alloc))) return 0;
    if (FAILED(ID3D12Device_CreateCommandList(dev, 0, D3D12_COMMAND_LIST_TYPE_DIRECT, alloc, NULL, &IID_ID3D12GraphicsCommandList, (void **)&cl))) return 0;
    if (FAILED(ID3D12Device_CreateFence(dev, 0, D3D12_FENCE_FLAG_NONE, &IID_ID3D12Fence, (void **)&fence))) return 0;
    fence_event = CreateEventA(NULL, FALSE, FALSE, NULL);
    if (FAILED(((fn_create_rec)VT(dml)[11])(dml, &IID_IDMLCommandRecorder_, &recorder))) return 0;
    heap_increment = ID3D12Device_GetDescriptorHandleIncrementSize(dev, D3D12_DESCRIPTOR_HEAP_TYPE_CBV_SRV_UAV);
    memset(&hd, 0, sizeof hd); hd.Type = D3D12_DESCRIPTOR_HEAP_TYPE_CBV_SRV_UAV; hd.NumDescriptors = HEAP_DESCS; hd.Flags = D3D12_DESCRIPTOR_HEAP_FLAG_SHADER_VISIBLE;
    if (FAILED(ID3D12Device_CreateDescriptorHeap(dev, &hd, &IID_ID3D12DescriptorHeap, (void **)&heap))) return 0;
    return 1;
}

int main(int argc, char **argv) {
    const char *dll = argc > 1 ? argv[1] : "DirectML.dll"; int i, adapter = 0, warp = 0, debug_layer = 0; UINT min_level = 0x1000;
    for (i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--adapter") && i + 1 < argc) adapter = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warp")) warp = 1;
        else if (!strcmp(argv[i], "--debug-layer")) debug_layer = 1;
        else if (!strcmp(argv[i], "--min-feature-level") && i + 1 < argc) min_level = (UINT)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--cache-max") && i + 1 < argc) { cache_limit = atoi(argv[++i]); if (cache_limit < 1) cache_limit = 1; if (cache_limit > CACHE_MAX) cache_limit = CACHE_MAX; }
    }
    _setmode(0, _O_BINARY); _setmode(1, _O_BINARY);
    QueryPerformanceFrequency(&qpf);
    SetUnhandledExceptionFilter(on_crash);
    SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX);
    if (!setup(dll, adapter, warp, debug_layer, min_level)) { replyf("{\"status\":\"startup_failed\"}"); return 2; }
    replyf("{\"status\":\"ready\"}");
    for (;;) {
        UINT h[3]; char *json; jnode *req; blob *bufs; int n = 0, rc = 0; const char *cmd;
        if (!read_all(h, sizeof h)) break;
        if (h[0] != MAGIC || h[1] > (64u << 20) || h[2] > MAX_FRAME_BUFFERS) { fprintf(stderr, "runner: bad frame\n"); return 3; }
        json = malloc(h[1] + 1); if (!read_all(json, h[1])) break; json[h[1]] = 0;
        bufs = malloc(sizeof *bufs * (h[2] + 1));
        for (n = 0; n < (int)h[2]; n++) {
            if (!read_all(&bufs[n].len, 4)) return 3;
            bufs[n].data = malloc(bufs[n].len ? bufs[n].len : 1);
            if (!read_all(bufs[n].data, bufs[n].len)) return 3;
        }
        jp = json; req = jvalue(); cmd = jstr(req, "cmd");
        if (!strcmp(cmd, "info")) do_info();
        else if (!strcmp(cmd, "run")) rc = run_items(&req, 1, bufs, n, 1);
        else if (!strcmp(cmd, "batch")) {
            jnode *items = jget(req, "items");
            if (!items || items->kind != J_ARR || items->count > MAX_BATCH) replyf("{\"status\":\"error\",\"stage\":\"request\",\"hr\":\"a batch holds 0 to %d items\"}", MAX_BATCH);
            else rc = run_items(items->items, items->count, bufs, n, 0);
        }
        else if (!strcmp(cmd, "crash")) { volatile int *p = NULL; *p = 1; }       /* test hook: a crashing driver */
        else if (!strcmp(cmd, "hang")) { announce("hang", 1, 1); Sleep(INFINITE); } /* test hook: a hung driver */
        else replyf("{\"status\":\"error\",\"stage\":\"request\",\"hr\":\"unknown cmd\"}");
        jfree(req); free(json);
        while (n-- > 0) free(bufs[n].data);
        free(bufs);
        if (rc < 0) return 4; /* device removed: exit, the client starts a new runner */
    }
    return 0;
}
