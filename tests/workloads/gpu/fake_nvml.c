/* A fake NVML (libnvidia-ml.so.1) for tests without a GPU: the entry points
 * pystrobe opens, answering from a script re-read at every call, so a test
 * (or the workload itself, which knows its pid) can change what the "GPUs"
 * say while pystrobe polls them. pystrobe loads it through
 * PYSTROBE_NVML_LIBRARY=<this file>.
 *
 * The script is the file named by $PYSTROBE_FAKE_NVML_SCRIPT, one statement
 * a line ('#' starts a comment):
 *   device NAME GPU_PERCENT MEMORY_USED_BYTES MEMORY_TOTAL_BYTES
 *   process PID DEVICE_INDEX MEMORY_BYTES SM_PERCENT   (SM_PERCENT '-': no sample)
 *   no_process_utilization     (every device answers NOT_SUPPORTED to it)
 *   init_fails                 (nvmlInit_v2 answers DRIVER_NOT_LOADED)
 * Devices are numbered in the order they appear. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 8
#define MAX_PROCESSES 64

typedef int nvmlReturn_t;
enum {
  SUCCESS = 0,
  ERROR_UNINITIALIZED = 1,
  ERROR_INVALID_ARGUMENT = 2,
  ERROR_NOT_SUPPORTED = 3,
  ERROR_NOT_FOUND = 6,
  ERROR_INSUFFICIENT_SIZE = 7,
  ERROR_DRIVER_NOT_LOADED = 9,
};
typedef struct fake_device* nvmlDevice_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

struct fake_device {
  char name[64];
  unsigned gpu_percent;
  unsigned long long used, total;
};
struct fake_process {
  unsigned pid, device;
  unsigned long long memory;
  int sm_percent; /* -1: no sample */
};
struct script {
  int devices, processes, no_process_utilization, init_fails;
  struct fake_device device[MAX_DEVICES];
  struct fake_process process[MAX_PROCESSES];
};

static struct script current;
static int initialized;
/* Stable handles: the address of a slot, whatever the script says now. */
static struct fake_device handles[MAX_DEVICES];

static void load_script(void) {
  memset(&current, 0, sizeof(current));
  const char* path = getenv("PYSTROBE_FAKE_NVML_SCRIPT");
  FILE* file = path ? fopen(path, "r") : NULL;
  if (!file) return;
  char line[512];
  while (fgets(line, sizeof(line), file)) {
    struct fake_device d;
    struct fake_process p;
    char sm[16];
    if (line[0] == '#') continue;
    if (sscanf(line, "device %63s %u %llu %llu", d.name, &d.gpu_percent, &d.used, &d.total) == 4 &&
        current.devices < MAX_DEVICES) {
      current.device[current.devices++] = d;
    } else if (sscanf(line, "process %u %u %llu %15s", &p.pid, &p.device, &p.memory, sm) == 4 &&
               current.processes < MAX_PROCESSES) {
      p.sm_percent = strcmp(sm, "-") == 0 ? -1 : atoi(sm);
      current.process[current.processes++] = p;
    } else if (strncmp(line, "no_process_utilization", 22) == 0) {
      current.no_process_utilization = 1;
    } else if (strncmp(line, "init_fails", 10) == 0) {
      current.init_fails = 1;
    }
  }
  fclose(file);
}

/* The device index of a handle, or -1. */
static int index_of(nvmlDevice_t device) {
  long index = device - handles;
  if (device == NULL || index < 0 || index >= current.devices) return -1;
  return (int)index;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) {
  load_script();
  if (current.init_fails) return ERROR_DRIVER_NOT_LOADED;
  initialized = 1;
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
  initialized = 0;
  return SUCCESS;
}

EXPORT const char* nvmlErrorString(nvmlReturn_t code) {
  switch (code) {
    case ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case ERROR_NOT_FOUND:
      return "Not Found";
  }
  return "Unknown Error";
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!initialized) return ERROR_UNINITIALIZED;
  load_script();
  *count = (unsigned)current.devices;
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  load_script();
  if (!initialized) return ERROR_UNINITIALIZED;
  if (index >= (unsigned)current.devices) return ERROR_INVALID_ARGUMENT;
  *device = &handles[index];
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  load_script();
  int i = index_of(device);
  if (i < 0) return ERROR_INVALID_ARGUMENT;
  snprintf(name, length, "%s", current.device[i].name);
  for (char* c = name; *c; ++c) {
    if (*c == '_') *c = ' '; /* the script's names have no spaces */
  }
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* out) {
  load_script();
  int i = index_of(device);
  if (i < 0) return ERROR_INVALID_ARGUMENT;
  out->gpu = current.device[i].gpu_percent;
  out->memory = current.device[i].gpu_percent / 2;
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* out) {
  load_script();
  int i = index_of(device);
  if (i < 0) return ERROR_INVALID_ARGUMENT;
  out->used = current.device[i].used;
  out->total = current.device[i].total;
  out->free = out->total > out->used ? out->total - out->used : 0;
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                            unsigned int* count,
                                                            nvmlProcessInfo_t* infos) {
  load_script();
  int i = index_of(device);
  if (i < 0 || count == NULL) return ERROR_INVALID_ARGUMENT;
  unsigned n = 0;
  for (int p = 0; p < current.processes; ++p) n += current.process[p].device == (unsigned)i;
  if (n > *count) {
    *count = n;
    return ERROR_INSUFFICIENT_SIZE;
  }
  *count = 0;
  for (int p = 0; p < current.processes; ++p) {
    if (current.process[p].device != (unsigned)i) continue;
    infos[*count].pid = current.process[p].pid;
    infos[*count].usedGpuMemory = current.process[p].memory;
    infos[*count].gpuInstanceId = 0xFFFFFFFFu;
    infos[*count].computeInstanceId = 0xFFFFFFFFu;
    ++*count;
  }
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                    nvmlProcessUtilizationSample_t* samples,
                                                    unsigned int* count,
                                                    unsigned long long last_seen) {
  load_script();
  int i = index_of(device);
  if (i < 0 || count == NULL) return ERROR_INVALID_ARGUMENT;
  if (current.no_process_utilization) return ERROR_NOT_SUPPORTED;
  struct timeval now;
  gettimeofday(&now, NULL);
  unsigned long long stamp = (unsigned long long)now.tv_sec * 1000000ull + now.tv_usec;
  unsigned n = 0;
  for (int p = 0; p < current.processes; ++p) {
    n += current.process[p].device == (unsigned)i && current.process[p].sm_percent >= 0;
  }
  if (n == 0 || stamp <= last_seen) return ERROR_NOT_FOUND;
  if (samples == NULL || n > *count) {
    *count = n;
    return ERROR_INSUFFICIENT_SIZE;
  }
  *count = 0;
  for (int p = 0; p < current.processes; ++p) {
    const struct fake_process* f = &current.process[p];
    if (f->device != (unsigned)i || f->sm_percent < 0) continue;
    nvmlProcessUtilizationSample_t* s = &samples[(*count)++];
    memset(s, 0, sizeof(*s));
    s->pid = f->pid;
    s->timeStamp = stamp;
    s->smUtil = (unsigned)f->sm_percent;
  }
  return SUCCESS;
}
