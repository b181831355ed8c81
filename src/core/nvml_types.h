/* nvml_types: the part of NVML's ABI that gflow uses, declared by hand because Debian
 * ships no nvml.h (it is in the CUDA toolkit only). Shared by the loader (nvml.c) and the
 * simulator (src/sim/nvml_sim.c) so both agree byte for byte. Layouts and values are
 * those of NVIDIA's nvml.h (r535-r550); the static asserts pin the sizes the driver
 * expects on LP64. */
#ifndef GFLOWD_NVML_TYPES_H
#define GFLOWD_NVML_TYPES_H

#include <stddef.h>

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_UNKNOWN = 999
};

/* An opaque handle; the loader never dereferences it. */
typedef struct nvmlDevice_st *nvmlDevice_t;

/* Buffer sizes from nvml.h. */
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_NVLINK_MAX_LINKS 18
/* usedGpuMemory when the driver cannot tell (e.g. Windows WDDM, some MIG setups). */
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

/* nvmlDeviceGetMemoryInfo (v1). */
typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

/* nvmlDeviceGetMemoryInfo_v2: a versioned struct; `version` must be
 * NVML_STRUCT_VERSION(Memory, 2) = sizeof | 2 << 24, or the driver answers
 * ARGUMENT_VERSION_MISMATCH; a bare 2, as nvtop passes, is not a valid version. */
typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;
#define NVML_MEMORY_V2_VERSION ((unsigned int)(sizeof(nvmlMemory_v2_t) | 2u << 24))

typedef struct {
    unsigned int gpu;    /* percent of time a kernel ran over the last sample period */
    unsigned int memory; /* percent of time device memory was read or written */
} nvmlUtilization_t;

/* nvmlDeviceGetPciInfo_v2/_v3 and nvmlDeviceGetNvLinkRemotePciInfo_v2. The r390 layout
 * moved the old 16-byte busId to busIdLegacy and added a 32-byte busId at the end. */
typedef struct {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* "0000:3B:00.0" */
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "00000000:3B:00.0" */
} nvmlPciInfo_t;

/* The pre-r390 layout written by the unversioned nvmlDeviceGetPciInfo and
 * nvmlDeviceGetNvLinkRemotePciInfo: busId first, then the same integers. It is smaller
 * than nvmlPciInfo_t, so passing an nvmlPciInfo_t buffer to the old call is safe. */
typedef struct {
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    unsigned int reserved0, reserved1, reserved2, reserved3;
} nvmlPciInfoLegacy_t;

/* nvmlDeviceGetComputeRunningProcesses (v1): 16 bytes. */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* bytes, or NVML_VALUE_NOT_AVAILABLE */
} nvmlProcessInfo_v1_t;

/* nvmlDeviceGetComputeRunningProcesses_v2/_v3: 24 bytes. */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId; /* MIG, ~0 when not MIG */
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

/* nvmlDeviceGetProcessUtilization: one sample of one process. */
typedef struct {
    unsigned int pid;
    unsigned long long timeStamp; /* microseconds */
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

/* The 32-byte entry some 535-series drivers write through the same _v3 entry point:
 * the nvml.h of that series (CUDA 12.2) appended usedGpuCcProtectedMemory to
 * nvmlProcessInfo_t, and later headers moved the field to nvmlProcessDetail_v1_t,
 * restoring 24 bytes (pynvml carries both layouts for this reason). So the stride
 * depends on the driver, not on the symbol name: the loader probes it, and the
 * simulator's "proc32" build writes it. */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
    unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessInfo_cc_t;

typedef enum {
    NVML_TOPOLOGY_INTERNAL = 0,
    NVML_TOPOLOGY_SINGLE = 10,
    NVML_TOPOLOGY_MULTIPLE = 20,
    NVML_TOPOLOGY_HOSTBRIDGE = 30,
    NVML_TOPOLOGY_NODE = 40,
    NVML_TOPOLOGY_SYSTEM = 50
} nvmlGpuTopologyLevel_t;

typedef enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 } nvmlEnableState_t;

typedef enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;

typedef enum { NVML_AFFINITY_SCOPE_NODE = 0, NVML_AFFINITY_SCOPE_SOCKET = 1 } nvmlAffinityScope_t;

/* What the far end of an NVLink is (nvmlDeviceGetNvLinkRemoteDeviceType): on NVSwitch
 * systems (HGX/DGX) every link of a GPU goes to a switch. */
typedef enum {
    NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
    NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
    NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF
} nvmlIntNvLinkDeviceType_t;

/* nvmlDeviceGetP2PStatus: which peer-to-peer capability is asked about, and the answer. */
typedef enum {
    NVML_P2P_CAPS_INDEX_READ = 0,
    NVML_P2P_CAPS_INDEX_WRITE = 1,
    NVML_P2P_CAPS_INDEX_NVLINK = 2,
    NVML_P2P_CAPS_INDEX_ATOMICS = 3,
    NVML_P2P_CAPS_INDEX_PROP = 4,
    NVML_P2P_CAPS_INDEX_UNKNOWN = 5
} nvmlGpuP2PCapsIndex_t;

typedef enum {
    NVML_P2P_STATUS_OK = 0,
    NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED = 1, /* sic, nvml.h's spelling */
    NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2,
    NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 3,
    NVML_P2P_STATUS_DISABLED_BY_REGKEY = 4,
    NVML_P2P_STATUS_NOT_SUPPORTED = 5,
    NVML_P2P_STATUS_UNKNOWN = 6
} nvmlGpuP2PStatus_t;
/* MIG (Multi-Instance GPU, r450+). nvmlDeviceGetMigMode reports the current and the
 * pending mode (a change takes effect after a GPU reset); MIG devices are reached by
 * index 0..nvmlDeviceGetMaxMigDeviceCount()-1 from their parent, and an index without
 * a device answers NOT_FOUND (the indices may have holes). A MIG device handle works
 * with GetUUID ("MIG-..."), GetName, GetMemoryInfo and the process lists. */
#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE 0x1

/* ---- health (nvml_health.c, gpu_xid.c; the simulator's nvml_sim_health.c) ---- */

/* nvmlDeviceGetTotalEccErrors(dev, nvmlMemoryErrorType_t, nvmlEccCounterType_t,
 * unsigned long long *count): volatile counts since the last driver load, aggregate
 * ones over the board's life. */
typedef enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
} nvmlMemoryErrorType_t;
typedef enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 } nvmlEccCounterType_t;

/* nvmlDeviceGetRetiredPages(dev, cause, unsigned int *pageCount, unsigned long long
 * *addresses): a pageCount of 0 asks for the count only (INSUFFICIENT_SIZE when there
 * are pages). nvmlDeviceGetRetiredPagesPendingStatus(dev, nvmlEnableState_t *). */
typedef enum {
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
} nvmlPageRetirementCause_t;

/* nvmlDeviceGetComputeMode(dev, nvmlComputeMode_t *). EXCLUSIVE_THREAD is deprecated
 * and no longer reported by current drivers. */
typedef enum {
    NVML_COMPUTEMODE_DEFAULT = 0,
    NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
    NVML_COMPUTEMODE_PROHIBITED = 2,
    NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3
} nvmlComputeMode_t;

/* The bits of nvmlDeviceGetCurrentClocksEventReasons (r535+; the older name is
 * nvmlDeviceGetCurrentClocksThrottleReasons, same bits), unsigned long long. */
#define NVML_CLOCKS_EVENT_GPU_IDLE 0x1ULL
#define NVML_CLOCKS_EVENT_APPLICATIONS_CLOCKS_SETTING 0x2ULL
#define NVML_CLOCKS_EVENT_SW_POWER_CAP 0x4ULL
#define NVML_CLOCKS_EVENT_HW_SLOWDOWN 0x8ULL
#define NVML_CLOCKS_EVENT_SYNC_BOOST 0x10ULL
#define NVML_CLOCKS_EVENT_SW_THERMAL_SLOWDOWN 0x20ULL
#define NVML_CLOCKS_EVENT_HW_THERMAL_SLOWDOWN 0x40ULL
#define NVML_CLOCKS_EVENT_HW_POWER_BRAKE_SLOWDOWN 0x80ULL
#define NVML_CLOCKS_EVENT_DISPLAY_CLOCK_SETTING 0x100ULL

/* Events: nvmlEventSetCreate(nvmlEventSet_t *), nvmlDeviceRegisterEvents(dev,
 * unsigned long long types, set), nvmlEventSetWait_v2(set, nvmlEventData_t *,
 * unsigned int timeoutms) (legacy: nvmlEventSetWait, same arguments), nvmlEventSetFree.
 * An Xid event's eventData is the Xid. */
typedef struct nvmlEventSet_st *nvmlEventSet_t;
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t layout");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout");
_Static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t layout");
_Static_assert(sizeof(nvmlPciInfoLegacy_t) <= sizeof(nvmlPciInfo_t), "legacy pci layout");
_Static_assert(offsetof(nvmlPciInfoLegacy_t, domain) == offsetof(nvmlPciInfo_t, domain),
               "legacy pci layout");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t layout");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t layout");
_Static_assert(sizeof(nvmlProcessInfo_cc_t) == 32, "nvmlProcessInfo_cc_t layout");

_Static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t layout");

#endif
