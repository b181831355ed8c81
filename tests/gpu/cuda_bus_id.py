"""Prints the PCI bus id of CUDA device 0 as this process sees it (through the CUDA
driver API in libcuda.so.1, which ships with the NVIDIA driver: no toolkit needed), and
the CUDA_VISIBLE_DEVICES it was given. Used by real-nvml.sh inside a gflow job."""
import ctypes
import os
import sys

try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    sys.exit(f"cuda_bus_id: cannot load libcuda.so.1: {e}")
if cuda.cuInit(0) != 0:
    sys.exit("cuda_bus_id: cuInit failed")
count = ctypes.c_int(0)
cuda.cuDeviceGetCount(ctypes.byref(count))
dev = ctypes.c_int(0)
if count.value < 1 or cuda.cuDeviceGet(ctypes.byref(dev), 0) != 0:
    sys.exit(f"cuda_bus_id: no CUDA device visible (count {count.value})")
buf = ctypes.create_string_buffer(64)
if cuda.cuDeviceGetPCIBusId(buf, 64, dev) != 0:
    sys.exit("cuda_bus_id: cuDeviceGetPCIBusId failed")
print(f"visible={os.environ.get('CUDA_VISIBLE_DEVICES', '')} count={count.value} "
      f"bus_id={buf.value.decode()}")
