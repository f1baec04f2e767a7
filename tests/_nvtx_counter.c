/* An NVTX injection library that counts what it is told (tests/test_nvtx.py builds it).
 *
 * NVTX (the C headers any NVTX user compiles in, the nvtx Python package included)
 * loads the library named by NVTX_INJECTION64_PATH at its first call and calls its
 * InitializeInjectionNvtx2 with a function that hands out export tables. The tool asks
 * the callbacks table (NVTX_ETID_CALLBACKS) for the function tables of the CORE and
 * CORE2 modules and writes its own functions into the slots it handles; every other
 * slot stays a no-op. Only the definitions used here are written out, from NVIDIA's
 * nvtx3/nvtxDetail/nvtxTypes.h and nvToolsExt.h (NVTX v3).
 *
 * Counted per (kind, domain, message): marks, pushes, pops, range starts and ends, the
 * sum of integer payloads. Pops are checked against each thread's pushes per domain
 * (a pop with nothing pushed on that thread is counted as "underflow").
 * nvtx_counter_dump(path) writes the counts as tab-separated lines.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

typedef void (*NvtxFunctionPointer)(void);
typedef NvtxFunctionPointer **NvtxFunctionTable;

typedef struct {
    size_t struct_size;
    int (*GetModuleFunctionTable)(int module, NvtxFunctionTable *out_table,
                                  unsigned int *out_size);
} NvtxExportTableCallbacks;

typedef const void *(*NvtxGetExportTableFunc_t)(uint32_t exportTableId);

enum { NVTX_ETID_CALLBACKS = 1 };
enum { NVTX_CB_MODULE_CORE = 1, NVTX_CB_MODULE_CORE2 = 5 };
enum {  /* NvtxCallbackIdCore */
    CORE_MarkEx = 1, CORE_MarkA = 2, CORE_RangeStartEx = 4, CORE_RangeStartA = 5,
    CORE_RangeEnd = 7, CORE_RangePushEx = 8, CORE_RangePushA = 9, CORE_RangePop = 11
};
enum {  /* NvtxCallbackIdCore2 */
    CORE2_DomainMarkEx = 1, CORE2_DomainRangeStartEx = 2, CORE2_DomainRangeEnd = 3,
    CORE2_DomainRangePushEx = 4, CORE2_DomainRangePop = 5, CORE2_DomainRegisterStringA = 10,
    CORE2_DomainCreateA = 12, CORE2_DomainDestroy = 14
};
enum { MSG_ASCII = 1, MSG_UNICODE = 2, MSG_REGISTERED = 3 };
enum { PAYLOAD_U64 = 1, PAYLOAD_I64 = 2, PAYLOAD_U32 = 4, PAYLOAD_I32 = 5 };

typedef struct { /* nvtxEventAttributes_v2 */
    uint16_t version;
    uint16_t size;
    uint32_t category;
    int32_t colorType;
    uint32_t color;
    int32_t payloadType;
    int32_t reserved0;
    union { uint64_t u64; int64_t i64; double d; uint32_t u32; int32_t i32; float f; } payload;
    int32_t messageType;
    union { const char *ascii; const wchar_t *unicode; const char *registered; } message;
} EventAttributes;

#define MAX_DOMAINS 64
#define MAX_RECORDS 4096
#define TEXT 160

typedef struct { int index; char name[TEXT]; } Domain;  /* what a domain handle points at */

typedef struct {
    char kind[8];
    int domain;
    char message[TEXT];
    long long count;
    long long payload;
} Record;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Domain default_domain = {0, ""};
static Domain *domains[MAX_DOMAINS] = {&default_domain};  /* [0]: a NULL handle's */
static int n_domains = 1;
static Record records[MAX_RECORDS];
static int n_records;
static long long overflow, underflow, inits;
static __thread int depth[MAX_DOMAINS];

static int domain_index(const void *handle) {
    return handle ? ((const Domain *)handle)->index : 0;
}

static void text_of(const EventAttributes *a, char *out) {
    const char *s = "";
    if (a) {
        if (a->messageType == MSG_ASCII || a->messageType == MSG_REGISTERED)
            s = a->message.ascii ? a->message.ascii : "";
        else if (a->messageType == MSG_UNICODE)
            s = "<unicode>";
    }
    snprintf(out, TEXT, "%s", s);
}

static long long payload_of(const EventAttributes *a) {
    if (!a) return 0;
    switch (a->payloadType) {
    case PAYLOAD_U64: return (long long)a->payload.u64;
    case PAYLOAD_I64: return (long long)a->payload.i64;
    case PAYLOAD_U32: return (long long)a->payload.u32;
    case PAYLOAD_I32: return (long long)a->payload.i32;
    default: return 0;
    }
}

static void note(const char *kind, int domain, const char *message, long long payload) {
    int i;
    pthread_mutex_lock(&lock);
    for (i = 0; i < n_records; i++) {
        Record *r = &records[i];
        if (r->domain == domain && !strcmp(r->kind, kind) && !strcmp(r->message, message)) {
            r->count++;
            r->payload += payload;
            pthread_mutex_unlock(&lock);
            return;
        }
    }
    if (n_records < MAX_RECORDS) {
        Record *r = &records[n_records++];
        snprintf(r->kind, sizeof r->kind, "%s", kind);
        r->domain = domain;
        snprintf(r->message, TEXT, "%s", message);
        r->count = 1;
        r->payload = payload;
    } else {
        overflow++;
    }
    pthread_mutex_unlock(&lock);
}

static void note_attrs(const char *kind, int domain, const EventAttributes *a) {
    char text[TEXT];
    text_of(a, text);
    note(kind, domain, text, payload_of(a));
}

static int push(int domain) { return depth[domain]++; }

static int pop(int domain) {
    if (depth[domain] <= 0) {
        pthread_mutex_lock(&lock);
        underflow++;
        pthread_mutex_unlock(&lock);
        return -1;
    }
    return --depth[domain];
}

/* -- CORE: the default domain's functions -- */
static void markEx(const EventAttributes *a) { note_attrs("mark", 0, a); }
static void markA(const char *m) { note("mark", 0, m ? m : "", 0); }
static uint64_t rangeStartEx(const EventAttributes *a) { note_attrs("start", 0, a); return 1; }
static uint64_t rangeStartA(const char *m) { note("start", 0, m ? m : "", 0); return 1; }
static void rangeEnd(uint64_t id) { (void)id; note("end", 0, "", 0); }
static int rangePushEx(const EventAttributes *a) { note_attrs("push", 0, a); return push(0); }
static int rangePushA(const char *m) { note("push", 0, m ? m : "", 0); return push(0); }
static int rangePop(void) { note("pop", 0, "", 0); return pop(0); }

/* -- CORE2: domains -- */
static void domainMarkEx(const void *d, const EventAttributes *a) {
    note_attrs("mark", domain_index(d), a);
}
static uint64_t domainRangeStartEx(const void *d, const EventAttributes *a) {
    note_attrs("start", domain_index(d), a);
    return 1;
}
static void domainRangeEnd(const void *d, uint64_t id) {
    (void)id;
    note("end", domain_index(d), "", 0);
}
static int domainRangePushEx(const void *d, const EventAttributes *a) {
    note_attrs("push", domain_index(d), a);
    return push(domain_index(d));
}
static int domainRangePop(const void *d) {
    note("pop", domain_index(d), "", 0);
    return pop(domain_index(d));
}
static const void *domainRegisterStringA(const void *d, const char *s) {
    (void)d;
    return strdup(s ? s : "");  /* the handle is the text: message.registered reads it */
}
static const void *domainCreateA(const char *name) {
    Domain *d;
    int i;
    pthread_mutex_lock(&lock);
    for (i = 1; i < n_domains; i++) {
        if (!strcmp(domains[i]->name, name ? name : "")) {
            pthread_mutex_unlock(&lock);
            return domains[i];
        }
    }
    if (n_domains >= MAX_DOMAINS) {
        pthread_mutex_unlock(&lock);
        return NULL;
    }
    d = calloc(1, sizeof *d);
    d->index = n_domains;
    snprintf(d->name, TEXT, "%s", name ? name : "");
    domains[n_domains++] = d;
    pthread_mutex_unlock(&lock);
    return d;
}
static void domainDestroy(const void *d) { (void)d; }  /* kept: counts name it */

static void set_slot(NvtxFunctionTable table, unsigned int size, unsigned int id,
                     NvtxFunctionPointer fn) {
    if (id < size && table[id])
        *table[id] = fn;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable) {
    const NvtxExportTableCallbacks *cb;
    NvtxFunctionTable t = NULL;
    unsigned int n = 0;
    cb = (const NvtxExportTableCallbacks *)getExportTable(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof(NvtxExportTableCallbacks))
        return 0;
    if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n))
        return 0;
    set_slot(t, n, CORE_MarkEx, (NvtxFunctionPointer)markEx);
    set_slot(t, n, CORE_MarkA, (NvtxFunctionPointer)markA);
    set_slot(t, n, CORE_RangeStartEx, (NvtxFunctionPointer)rangeStartEx);
    set_slot(t, n, CORE_RangeStartA, (NvtxFunctionPointer)rangeStartA);
    set_slot(t, n, CORE_RangeEnd, (NvtxFunctionPointer)rangeEnd);
    set_slot(t, n, CORE_RangePushEx, (NvtxFunctionPointer)rangePushEx);
    set_slot(t, n, CORE_RangePushA, (NvtxFunctionPointer)rangePushA);
    set_slot(t, n, CORE_RangePop, (NvtxFunctionPointer)rangePop);
    if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n))
        return 0;
    set_slot(t, n, CORE2_DomainMarkEx, (NvtxFunctionPointer)domainMarkEx);
    set_slot(t, n, CORE2_DomainRangeStartEx, (NvtxFunctionPointer)domainRangeStartEx);
    set_slot(t, n, CORE2_DomainRangeEnd, (NvtxFunctionPointer)domainRangeEnd);
    set_slot(t, n, CORE2_DomainRangePushEx, (NvtxFunctionPointer)domainRangePushEx);
    set_slot(t, n, CORE2_DomainRangePop, (NvtxFunctionPointer)domainRangePop);
    set_slot(t, n, CORE2_DomainRegisterStringA, (NvtxFunctionPointer)domainRegisterStringA);
    set_slot(t, n, CORE2_DomainCreateA, (NvtxFunctionPointer)domainCreateA);
    set_slot(t, n, CORE2_DomainDestroy, (NvtxFunctionPointer)domainDestroy);
    pthread_mutex_lock(&lock);
    inits++;
    pthread_mutex_unlock(&lock);
    return 1;
}

/* Write the counts to ``path``: "kind<TAB>domain<TAB>message<TAB>count<TAB>payload sum"
 * per line, then the "#inits", "#underflow" and "#overflow" totals. 0 on success. */
int nvtx_counter_dump(const char *path) {
    FILE *f = fopen(path, "w");
    int i;
    if (!f)
        return -1;
    pthread_mutex_lock(&lock);
    for (i = 0; i < n_records; i++) {
        const Record *r = &records[i];
        fprintf(f, "%s\t%s\t%s\t%lld\t%lld\n", r->kind,
                r->domain < n_domains ? domains[r->domain]->name : "?", r->message, r->count,
                r->payload);
    }
    fprintf(f, "#inits\t%lld\n#underflow\t%lld\n#overflow\t%lld\n", inits, underflow, overflow);
    pthread_mutex_unlock(&lock);
    return fclose(f) == 0 ? 0 : -1;
}
