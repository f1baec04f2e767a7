"""Type stub of ``cudriver.driver``, the checked mirror of ``cuda.bindings.driver``.

Each ``cu*`` function returns its outputs (None, the single output, or a tuple of
them) and raises ``cudriver.CudaError`` on failure; classes, enums and constants are
the bindings' own. See docs/typed-mirror.md.
"""

# Generated from cuda-bindings 13.5.0 by scripts/gen_driver_stub.py: do not edit.
# Regenerate with `python scripts/gen_driver_stub.py` after changing the installed
# cuda-bindings or the mirror; `--check` says whether this file is up to date.

__all__ = ["cuLaunchHostFunc"]

from typing import Any, NoReturn, SupportsInt

from cuda.bindings.driver import CUCoredumpGenerationFlags as CUCoredumpGenerationFlags
from cuda.bindings.driver import CUDA_ARRAY3D_DESCRIPTOR as CUDA_ARRAY3D_DESCRIPTOR
from cuda.bindings.driver import CUDA_ARRAY3D_DESCRIPTOR_st as CUDA_ARRAY3D_DESCRIPTOR_st
from cuda.bindings.driver import CUDA_ARRAY3D_DESCRIPTOR_v2 as CUDA_ARRAY3D_DESCRIPTOR_v2
from cuda.bindings.driver import CUDA_ARRAY_DESCRIPTOR as CUDA_ARRAY_DESCRIPTOR
from cuda.bindings.driver import CUDA_ARRAY_DESCRIPTOR_st as CUDA_ARRAY_DESCRIPTOR_st
from cuda.bindings.driver import CUDA_ARRAY_DESCRIPTOR_v2 as CUDA_ARRAY_DESCRIPTOR_v2
from cuda.bindings.driver import CUDA_ARRAY_MEMORY_REQUIREMENTS as CUDA_ARRAY_MEMORY_REQUIREMENTS
from cuda.bindings.driver import CUDA_ARRAY_MEMORY_REQUIREMENTS_st as CUDA_ARRAY_MEMORY_REQUIREMENTS_st
from cuda.bindings.driver import CUDA_ARRAY_MEMORY_REQUIREMENTS_v1 as CUDA_ARRAY_MEMORY_REQUIREMENTS_v1
from cuda.bindings.driver import CUDA_ARRAY_SPARSE_PROPERTIES as CUDA_ARRAY_SPARSE_PROPERTIES
from cuda.bindings.driver import CUDA_ARRAY_SPARSE_PROPERTIES_st as CUDA_ARRAY_SPARSE_PROPERTIES_st
from cuda.bindings.driver import CUDA_ARRAY_SPARSE_PROPERTIES_v1 as CUDA_ARRAY_SPARSE_PROPERTIES_v1
from cuda.bindings.driver import CUDA_BATCH_MEM_OP_NODE_PARAMS as CUDA_BATCH_MEM_OP_NODE_PARAMS
from cuda.bindings.driver import CUDA_BATCH_MEM_OP_NODE_PARAMS_v1 as CUDA_BATCH_MEM_OP_NODE_PARAMS_v1
from cuda.bindings.driver import CUDA_BATCH_MEM_OP_NODE_PARAMS_v1_st as CUDA_BATCH_MEM_OP_NODE_PARAMS_v1_st
from cuda.bindings.driver import CUDA_BATCH_MEM_OP_NODE_PARAMS_v2 as CUDA_BATCH_MEM_OP_NODE_PARAMS_v2
from cuda.bindings.driver import CUDA_BATCH_MEM_OP_NODE_PARAMS_v2_st as CUDA_BATCH_MEM_OP_NODE_PARAMS_v2_st
from cuda.bindings.driver import CUDA_CHILD_GRAPH_NODE_PARAMS as CUDA_CHILD_GRAPH_NODE_PARAMS
from cuda.bindings.driver import CUDA_CHILD_GRAPH_NODE_PARAMS_st as CUDA_CHILD_GRAPH_NODE_PARAMS_st
from cuda.bindings.driver import CUDA_CONDITIONAL_NODE_PARAMS as CUDA_CONDITIONAL_NODE_PARAMS
from cuda.bindings.driver import CUDA_EVENT_RECORD_NODE_PARAMS as CUDA_EVENT_RECORD_NODE_PARAMS
from cuda.bindings.driver import CUDA_EVENT_RECORD_NODE_PARAMS_st as CUDA_EVENT_RECORD_NODE_PARAMS_st
from cuda.bindings.driver import CUDA_EVENT_WAIT_NODE_PARAMS as CUDA_EVENT_WAIT_NODE_PARAMS
from cuda.bindings.driver import CUDA_EVENT_WAIT_NODE_PARAMS_st as CUDA_EVENT_WAIT_NODE_PARAMS_st
from cuda.bindings.driver import CUDA_EXTERNAL_MEMORY_BUFFER_DESC as CUDA_EXTERNAL_MEMORY_BUFFER_DESC
from cuda.bindings.driver import CUDA_EXTERNAL_MEMORY_BUFFER_DESC_st as CUDA_EXTERNAL_MEMORY_BUFFER_DESC_st
from cuda.bindings.driver import CUDA_EXTERNAL_MEMORY_BUFFER_DESC_v1 as CUDA_EXTERNAL_MEMORY_BUFFER_DESC_v1
from cuda.bindings.driver import CUDA_EXTERNAL_MEMORY_HANDLE_DESC as CUDA_EXTERNAL_MEMORY_HANDLE_DESC
from cuda.bindings.driver import CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st as CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st
from cuda.bindings.driver import CUDA_EXTERNAL_MEMORY_HANDLE_DESC_v1 as CUDA_EXTERNAL_MEMORY_HANDLE_DESC_v1
from cuda.bindings.driver import CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC as CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC
from cuda.bindings.driver import CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC_st as CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC_st
from cuda.bindings.driver import CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC_v1 as CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC_v1
from cuda.bindings.driver import CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC as CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC
from cuda.bindings.driver import CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_st as CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_st
from cuda.bindings.driver import CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_v1 as CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_v1
from cuda.bindings.driver import CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS as CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS
from cuda.bindings.driver import CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st as CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st
from cuda.bindings.driver import CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_v1 as CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_v1
from cuda.bindings.driver import CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS as CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS
from cuda.bindings.driver import CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st as CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st
from cuda.bindings.driver import CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_v1 as CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_v1
from cuda.bindings.driver import CUDA_EXT_SEM_SIGNAL_NODE_PARAMS as CUDA_EXT_SEM_SIGNAL_NODE_PARAMS
from cuda.bindings.driver import CUDA_EXT_SEM_SIGNAL_NODE_PARAMS_st as CUDA_EXT_SEM_SIGNAL_NODE_PARAMS_st
from cuda.bindings.driver import CUDA_EXT_SEM_SIGNAL_NODE_PARAMS_v1 as CUDA_EXT_SEM_SIGNAL_NODE_PARAMS_v1
from cuda.bindings.driver import CUDA_EXT_SEM_SIGNAL_NODE_PARAMS_v2 as CUDA_EXT_SEM_SIGNAL_NODE_PARAMS_v2
from cuda.bindings.driver import CUDA_EXT_SEM_SIGNAL_NODE_PARAMS_v2_st as CUDA_EXT_SEM_SIGNAL_NODE_PARAMS_v2_st
from cuda.bindings.driver import CUDA_EXT_SEM_WAIT_NODE_PARAMS as CUDA_EXT_SEM_WAIT_NODE_PARAMS
from cuda.bindings.driver import CUDA_EXT_SEM_WAIT_NODE_PARAMS_st as CUDA_EXT_SEM_WAIT_NODE_PARAMS_st
from cuda.bindings.driver import CUDA_EXT_SEM_WAIT_NODE_PARAMS_v1 as CUDA_EXT_SEM_WAIT_NODE_PARAMS_v1
from cuda.bindings.driver import CUDA_EXT_SEM_WAIT_NODE_PARAMS_v2 as CUDA_EXT_SEM_WAIT_NODE_PARAMS_v2
from cuda.bindings.driver import CUDA_EXT_SEM_WAIT_NODE_PARAMS_v2_st as CUDA_EXT_SEM_WAIT_NODE_PARAMS_v2_st
from cuda.bindings.driver import CUDA_FABRIC_COPY_BATCH_OP as CUDA_FABRIC_COPY_BATCH_OP
from cuda.bindings.driver import CUDA_FABRIC_COPY_BATCH_OP_st as CUDA_FABRIC_COPY_BATCH_OP_st
from cuda.bindings.driver import CUDA_FABRIC_COPY_BATCH_OP_v1 as CUDA_FABRIC_COPY_BATCH_OP_v1
from cuda.bindings.driver import CUDA_FABRIC_CPY_BATCH_NODE_PARAMS as CUDA_FABRIC_CPY_BATCH_NODE_PARAMS
from cuda.bindings.driver import CUDA_FABRIC_CPY_BATCH_NODE_PARAMS_V1 as CUDA_FABRIC_CPY_BATCH_NODE_PARAMS_V1
from cuda.bindings.driver import CUDA_FABRIC_CPY_BATCH_NODE_PARAMS_V1_st as CUDA_FABRIC_CPY_BATCH_NODE_PARAMS_V1_st
from cuda.bindings.driver import CUDA_GRAPH_INSTANTIATE_PARAMS as CUDA_GRAPH_INSTANTIATE_PARAMS
from cuda.bindings.driver import CUDA_GRAPH_INSTANTIATE_PARAMS_st as CUDA_GRAPH_INSTANTIATE_PARAMS_st
from cuda.bindings.driver import CUDA_HOST_NODE_PARAMS as CUDA_HOST_NODE_PARAMS
from cuda.bindings.driver import CUDA_HOST_NODE_PARAMS_st as CUDA_HOST_NODE_PARAMS_st
from cuda.bindings.driver import CUDA_HOST_NODE_PARAMS_v1 as CUDA_HOST_NODE_PARAMS_v1
from cuda.bindings.driver import CUDA_HOST_NODE_PARAMS_v2 as CUDA_HOST_NODE_PARAMS_v2
from cuda.bindings.driver import CUDA_HOST_NODE_PARAMS_v2_st as CUDA_HOST_NODE_PARAMS_v2_st
from cuda.bindings.driver import CUDA_KERNEL_NODE_PARAMS as CUDA_KERNEL_NODE_PARAMS
from cuda.bindings.driver import CUDA_KERNEL_NODE_PARAMS_st as CUDA_KERNEL_NODE_PARAMS_st
from cuda.bindings.driver import CUDA_KERNEL_NODE_PARAMS_v1 as CUDA_KERNEL_NODE_PARAMS_v1
from cuda.bindings.driver import CUDA_KERNEL_NODE_PARAMS_v2 as CUDA_KERNEL_NODE_PARAMS_v2
from cuda.bindings.driver import CUDA_KERNEL_NODE_PARAMS_v2_st as CUDA_KERNEL_NODE_PARAMS_v2_st
from cuda.bindings.driver import CUDA_KERNEL_NODE_PARAMS_v3 as CUDA_KERNEL_NODE_PARAMS_v3
from cuda.bindings.driver import CUDA_KERNEL_NODE_PARAMS_v3_st as CUDA_KERNEL_NODE_PARAMS_v3_st
from cuda.bindings.driver import CUDA_LAUNCH_PARAMS as CUDA_LAUNCH_PARAMS
from cuda.bindings.driver import CUDA_LAUNCH_PARAMS_st as CUDA_LAUNCH_PARAMS_st
from cuda.bindings.driver import CUDA_LAUNCH_PARAMS_v1 as CUDA_LAUNCH_PARAMS_v1
from cuda.bindings.driver import CUDA_MEMCPY2D as CUDA_MEMCPY2D
from cuda.bindings.driver import CUDA_MEMCPY2D_st as CUDA_MEMCPY2D_st
from cuda.bindings.driver import CUDA_MEMCPY2D_v2 as CUDA_MEMCPY2D_v2
from cuda.bindings.driver import CUDA_MEMCPY3D as CUDA_MEMCPY3D
from cuda.bindings.driver import CUDA_MEMCPY3D_BATCH_OP as CUDA_MEMCPY3D_BATCH_OP
from cuda.bindings.driver import CUDA_MEMCPY3D_BATCH_OP_st as CUDA_MEMCPY3D_BATCH_OP_st
from cuda.bindings.driver import CUDA_MEMCPY3D_BATCH_OP_v1 as CUDA_MEMCPY3D_BATCH_OP_v1
from cuda.bindings.driver import CUDA_MEMCPY3D_PEER as CUDA_MEMCPY3D_PEER
from cuda.bindings.driver import CUDA_MEMCPY3D_PEER_st as CUDA_MEMCPY3D_PEER_st
from cuda.bindings.driver import CUDA_MEMCPY3D_PEER_v1 as CUDA_MEMCPY3D_PEER_v1
from cuda.bindings.driver import CUDA_MEMCPY3D_st as CUDA_MEMCPY3D_st
from cuda.bindings.driver import CUDA_MEMCPY3D_v2 as CUDA_MEMCPY3D_v2
from cuda.bindings.driver import CUDA_MEMCPY_BATCH_NODE_PARAMS as CUDA_MEMCPY_BATCH_NODE_PARAMS
from cuda.bindings.driver import CUDA_MEMCPY_BATCH_NODE_PARAMS_V1 as CUDA_MEMCPY_BATCH_NODE_PARAMS_V1
from cuda.bindings.driver import CUDA_MEMCPY_BATCH_NODE_PARAMS_V1_st as CUDA_MEMCPY_BATCH_NODE_PARAMS_V1_st
from cuda.bindings.driver import CUDA_MEMCPY_NODE_PARAMS as CUDA_MEMCPY_NODE_PARAMS
from cuda.bindings.driver import CUDA_MEMCPY_NODE_PARAMS_st as CUDA_MEMCPY_NODE_PARAMS_st
from cuda.bindings.driver import CUDA_MEMSET_NODE_PARAMS as CUDA_MEMSET_NODE_PARAMS
from cuda.bindings.driver import CUDA_MEMSET_NODE_PARAMS_st as CUDA_MEMSET_NODE_PARAMS_st
from cuda.bindings.driver import CUDA_MEMSET_NODE_PARAMS_v1 as CUDA_MEMSET_NODE_PARAMS_v1
from cuda.bindings.driver import CUDA_MEMSET_NODE_PARAMS_v2 as CUDA_MEMSET_NODE_PARAMS_v2
from cuda.bindings.driver import CUDA_MEMSET_NODE_PARAMS_v2_st as CUDA_MEMSET_NODE_PARAMS_v2_st
from cuda.bindings.driver import CUDA_MEM_ALLOC_NODE_PARAMS as CUDA_MEM_ALLOC_NODE_PARAMS
from cuda.bindings.driver import CUDA_MEM_ALLOC_NODE_PARAMS_v1 as CUDA_MEM_ALLOC_NODE_PARAMS_v1
from cuda.bindings.driver import CUDA_MEM_ALLOC_NODE_PARAMS_v1_st as CUDA_MEM_ALLOC_NODE_PARAMS_v1_st
from cuda.bindings.driver import CUDA_MEM_ALLOC_NODE_PARAMS_v2 as CUDA_MEM_ALLOC_NODE_PARAMS_v2
from cuda.bindings.driver import CUDA_MEM_ALLOC_NODE_PARAMS_v2_st as CUDA_MEM_ALLOC_NODE_PARAMS_v2_st
from cuda.bindings.driver import CUDA_MEM_FREE_NODE_PARAMS as CUDA_MEM_FREE_NODE_PARAMS
from cuda.bindings.driver import CUDA_MEM_FREE_NODE_PARAMS_st as CUDA_MEM_FREE_NODE_PARAMS_st
from cuda.bindings.driver import CUDA_POINTER_ATTRIBUTE_ACCESS_FLAGS as CUDA_POINTER_ATTRIBUTE_ACCESS_FLAGS
from cuda.bindings.driver import CUDA_POINTER_ATTRIBUTE_P2P_TOKENS as CUDA_POINTER_ATTRIBUTE_P2P_TOKENS
from cuda.bindings.driver import CUDA_POINTER_ATTRIBUTE_P2P_TOKENS_st as CUDA_POINTER_ATTRIBUTE_P2P_TOKENS_st
from cuda.bindings.driver import CUDA_POINTER_ATTRIBUTE_P2P_TOKENS_v1 as CUDA_POINTER_ATTRIBUTE_P2P_TOKENS_v1
from cuda.bindings.driver import CUDA_RESOURCE_DESC as CUDA_RESOURCE_DESC
from cuda.bindings.driver import CUDA_RESOURCE_DESC_st as CUDA_RESOURCE_DESC_st
from cuda.bindings.driver import CUDA_RESOURCE_DESC_v1 as CUDA_RESOURCE_DESC_v1
from cuda.bindings.driver import CUDA_RESOURCE_VIEW_DESC as CUDA_RESOURCE_VIEW_DESC
from cuda.bindings.driver import CUDA_RESOURCE_VIEW_DESC_st as CUDA_RESOURCE_VIEW_DESC_st
from cuda.bindings.driver import CUDA_RESOURCE_VIEW_DESC_v1 as CUDA_RESOURCE_VIEW_DESC_v1
from cuda.bindings.driver import CUDA_TEXTURE_DESC as CUDA_TEXTURE_DESC
from cuda.bindings.driver import CUDA_TEXTURE_DESC_st as CUDA_TEXTURE_DESC_st
from cuda.bindings.driver import CUDA_TEXTURE_DESC_v1 as CUDA_TEXTURE_DESC_v1
from cuda.bindings.driver import CUGLDeviceList as CUGLDeviceList
from cuda.bindings.driver import CUGLmap_flags as CUGLmap_flags
from cuda.bindings.driver import CUGPUDirectRDMAWritesOrdering as CUGPUDirectRDMAWritesOrdering
from cuda.bindings.driver import CU_DEV_SM_RESOURCE_GROUP_PARAMS as CU_DEV_SM_RESOURCE_GROUP_PARAMS
from cuda.bindings.driver import CU_DEV_SM_RESOURCE_GROUP_PARAMS_st as CU_DEV_SM_RESOURCE_GROUP_PARAMS_st
from cuda.bindings.driver import CUaccessPolicyWindow as CUaccessPolicyWindow
from cuda.bindings.driver import CUaccessPolicyWindow_st as CUaccessPolicyWindow_st
from cuda.bindings.driver import CUaccessPolicyWindow_v1 as CUaccessPolicyWindow_v1
from cuda.bindings.driver import CUaccessProperty as CUaccessProperty
from cuda.bindings.driver import CUaddress_mode as CUaddress_mode
from cuda.bindings.driver import CUarray as CUarray
from cuda.bindings.driver import CUarrayMapInfo as CUarrayMapInfo
from cuda.bindings.driver import CUarrayMapInfo_st as CUarrayMapInfo_st
from cuda.bindings.driver import CUarrayMapInfo_v1 as CUarrayMapInfo_v1
from cuda.bindings.driver import CUarraySparseSubresourceType as CUarraySparseSubresourceType
from cuda.bindings.driver import CUarray_cubemap_face as CUarray_cubemap_face
from cuda.bindings.driver import CUarray_format as CUarray_format
from cuda.bindings.driver import CUasyncCallback as CUasyncCallback
from cuda.bindings.driver import CUasyncCallbackHandle as CUasyncCallbackHandle
from cuda.bindings.driver import CUasyncNotificationInfo as CUasyncNotificationInfo
from cuda.bindings.driver import CUasyncNotificationInfo_st as CUasyncNotificationInfo_st
from cuda.bindings.driver import CUasyncNotificationType as CUasyncNotificationType
from cuda.bindings.driver import CUatomicOperation as CUatomicOperation
from cuda.bindings.driver import CUatomicOperationCapability as CUatomicOperationCapability
from cuda.bindings.driver import CUcheckpointCheckpointArgs as CUcheckpointCheckpointArgs
from cuda.bindings.driver import CUcheckpointCheckpointArgs_st as CUcheckpointCheckpointArgs_st
from cuda.bindings.driver import CUcheckpointCustomStorageInfo as CUcheckpointCustomStorageInfo
from cuda.bindings.driver import CUcheckpointCustomStorageInfo_st as CUcheckpointCustomStorageInfo_st
from cuda.bindings.driver import CUcheckpointCustomStoragePerDeviceData as CUcheckpointCustomStoragePerDeviceData
from cuda.bindings.driver import CUcheckpointCustomStoragePerDeviceData_st as CUcheckpointCustomStoragePerDeviceData_st
from cuda.bindings.driver import CUcheckpointGpuPair as CUcheckpointGpuPair
from cuda.bindings.driver import CUcheckpointGpuPair_st as CUcheckpointGpuPair_st
from cuda.bindings.driver import CUcheckpointLockArgs as CUcheckpointLockArgs
from cuda.bindings.driver import CUcheckpointLockArgs_st as CUcheckpointLockArgs_st
from cuda.bindings.driver import CUcheckpointOperationHandle as CUcheckpointOperationHandle
from cuda.bindings.driver import CUcheckpointRestoreArgs as CUcheckpointRestoreArgs
from cuda.bindings.driver import CUcheckpointRestoreArgs_st as CUcheckpointRestoreArgs_st
from cuda.bindings.driver import CUcheckpointUnlockArgs as CUcheckpointUnlockArgs
from cuda.bindings.driver import CUcheckpointUnlockArgs_st as CUcheckpointUnlockArgs_st
from cuda.bindings.driver import CUcigDataType as CUcigDataType
from cuda.bindings.driver import CUcliqueInfo as CUcliqueInfo
from cuda.bindings.driver import CUcliqueInfo_st as CUcliqueInfo_st
from cuda.bindings.driver import CUcliqueType as CUcliqueType
from cuda.bindings.driver import CUclusterSchedulingPolicy as CUclusterSchedulingPolicy
from cuda.bindings.driver import CUcomputemode as CUcomputemode
from cuda.bindings.driver import CUcontext as CUcontext
from cuda.bindings.driver import CUcoredumpCallbackHandle as CUcoredumpCallbackHandle
from cuda.bindings.driver import CUcoredumpSettings as CUcoredumpSettings
from cuda.bindings.driver import CUcoredumpStatusCallback as CUcoredumpStatusCallback
from cuda.bindings.driver import CUctxCigParam as CUctxCigParam
from cuda.bindings.driver import CUctxCigParam_st as CUctxCigParam_st
from cuda.bindings.driver import CUctxCreateParams as CUctxCreateParams
from cuda.bindings.driver import CUctxCreateParams_st as CUctxCreateParams_st
from cuda.bindings.driver import CUctx_flags as CUctx_flags
from cuda.bindings.driver import CUdevResource as CUdevResource
from cuda.bindings.driver import CUdevResourceDesc as CUdevResourceDesc
from cuda.bindings.driver import CUdevResourceType as CUdevResourceType
from cuda.bindings.driver import CUdevResource_st as CUdevResource_st
from cuda.bindings.driver import CUdevResource_v1 as CUdevResource_v1
from cuda.bindings.driver import CUdevSmResource as CUdevSmResource
from cuda.bindings.driver import CUdevSmResourceGroup_flags as CUdevSmResourceGroup_flags
from cuda.bindings.driver import CUdevSmResourceSplitByCount_flags as CUdevSmResourceSplitByCount_flags
from cuda.bindings.driver import CUdevSmResource_st as CUdevSmResource_st
from cuda.bindings.driver import CUdevWorkqueueConfigResource as CUdevWorkqueueConfigResource
from cuda.bindings.driver import CUdevWorkqueueConfigResource_st as CUdevWorkqueueConfigResource_st
from cuda.bindings.driver import CUdevWorkqueueConfigScope as CUdevWorkqueueConfigScope
from cuda.bindings.driver import CUdevWorkqueueResource as CUdevWorkqueueResource
from cuda.bindings.driver import CUdevWorkqueueResource_st as CUdevWorkqueueResource_st
from cuda.bindings.driver import CUdevice as CUdevice
from cuda.bindings.driver import CUdeviceNumaConfig as CUdeviceNumaConfig
from cuda.bindings.driver import CUdevice_P2PAttribute as CUdevice_P2PAttribute
from cuda.bindings.driver import CUdevice_attribute as CUdevice_attribute
from cuda.bindings.driver import CUdevice_v1 as CUdevice_v1
from cuda.bindings.driver import CUdeviceptr as CUdeviceptr
from cuda.bindings.driver import CUdeviceptr_v2 as CUdeviceptr_v2
from cuda.bindings.driver import CUdevprop as CUdevprop
from cuda.bindings.driver import CUdevprop_st as CUdevprop_st
from cuda.bindings.driver import CUdevprop_v1 as CUdevprop_v1
from cuda.bindings.driver import CUdriverProcAddressQueryResult as CUdriverProcAddressQueryResult
from cuda.bindings.driver import CUdriverProcAddress_flags as CUdriverProcAddress_flags
from cuda.bindings.driver import CUeglColorFormat as CUeglColorFormat
from cuda.bindings.driver import CUeglFrame as CUeglFrame
from cuda.bindings.driver import CUeglFrameType as CUeglFrameType
from cuda.bindings.driver import CUeglFrame_st as CUeglFrame_st
from cuda.bindings.driver import CUeglFrame_v1 as CUeglFrame_v1
from cuda.bindings.driver import CUeglResourceLocationFlags as CUeglResourceLocationFlags
from cuda.bindings.driver import CUeglStreamConnection as CUeglStreamConnection
from cuda.bindings.driver import CUevent as CUevent
from cuda.bindings.driver import CUevent_flags as CUevent_flags
from cuda.bindings.driver import CUevent_record_flags as CUevent_record_flags
from cuda.bindings.driver import CUevent_sched_flags as CUevent_sched_flags
from cuda.bindings.driver import CUevent_wait_flags as CUevent_wait_flags
from cuda.bindings.driver import CUexecAffinityParam as CUexecAffinityParam
from cuda.bindings.driver import CUexecAffinityParam_st as CUexecAffinityParam_st
from cuda.bindings.driver import CUexecAffinityParam_v1 as CUexecAffinityParam_v1
from cuda.bindings.driver import CUexecAffinitySmCount as CUexecAffinitySmCount
from cuda.bindings.driver import CUexecAffinitySmCount_st as CUexecAffinitySmCount_st
from cuda.bindings.driver import CUexecAffinitySmCount_v1 as CUexecAffinitySmCount_v1
from cuda.bindings.driver import CUexecAffinityType as CUexecAffinityType
from cuda.bindings.driver import CUextent3D as CUextent3D
from cuda.bindings.driver import CUextent3D_st as CUextent3D_st
from cuda.bindings.driver import CUextent3D_v1 as CUextent3D_v1
from cuda.bindings.driver import CUexternalMemory as CUexternalMemory
from cuda.bindings.driver import CUexternalMemoryHandleType as CUexternalMemoryHandleType
from cuda.bindings.driver import CUexternalSemaphore as CUexternalSemaphore
from cuda.bindings.driver import CUexternalSemaphoreHandleType as CUexternalSemaphoreHandleType
from cuda.bindings.driver import CUfabricCpyOperand as CUfabricCpyOperand
from cuda.bindings.driver import CUfabricCpyOperandType as CUfabricCpyOperandType
from cuda.bindings.driver import CUfabricCpyOperand_st as CUfabricCpyOperand_st
from cuda.bindings.driver import CUfilter_mode as CUfilter_mode
from cuda.bindings.driver import CUflushGPUDirectRDMAWritesOptions as CUflushGPUDirectRDMAWritesOptions
from cuda.bindings.driver import CUflushGPUDirectRDMAWritesScope as CUflushGPUDirectRDMAWritesScope
from cuda.bindings.driver import CUflushGPUDirectRDMAWritesTarget as CUflushGPUDirectRDMAWritesTarget
from cuda.bindings.driver import CUfunc_cache as CUfunc_cache
from cuda.bindings.driver import CUfunction as CUfunction
from cuda.bindings.driver import CUfunctionLoadingState as CUfunctionLoadingState
from cuda.bindings.driver import CUfunction_attribute as CUfunction_attribute
from cuda.bindings.driver import CUgraph as CUgraph
from cuda.bindings.driver import CUgraphChildGraphNodeOwnership as CUgraphChildGraphNodeOwnership
from cuda.bindings.driver import CUgraphConditionalHandle as CUgraphConditionalHandle
from cuda.bindings.driver import CUgraphConditionalNodeType as CUgraphConditionalNodeType
from cuda.bindings.driver import CUgraphDebugDot_flags as CUgraphDebugDot_flags
from cuda.bindings.driver import CUgraphDependencyType as CUgraphDependencyType
from cuda.bindings.driver import CUgraphDeviceNode as CUgraphDeviceNode
from cuda.bindings.driver import CUgraphEdgeData as CUgraphEdgeData
from cuda.bindings.driver import CUgraphEdgeData_st as CUgraphEdgeData_st
from cuda.bindings.driver import CUgraphExec as CUgraphExec
from cuda.bindings.driver import CUgraphExecUpdateResult as CUgraphExecUpdateResult
from cuda.bindings.driver import CUgraphExecUpdateResultInfo as CUgraphExecUpdateResultInfo
from cuda.bindings.driver import CUgraphExecUpdateResultInfo_st as CUgraphExecUpdateResultInfo_st
from cuda.bindings.driver import CUgraphExecUpdateResultInfo_v1 as CUgraphExecUpdateResultInfo_v1
from cuda.bindings.driver import CUgraphInstantiateResult as CUgraphInstantiateResult
from cuda.bindings.driver import CUgraphInstantiate_flags as CUgraphInstantiate_flags
from cuda.bindings.driver import CUgraphMem_attribute as CUgraphMem_attribute
from cuda.bindings.driver import CUgraphNode as CUgraphNode
from cuda.bindings.driver import CUgraphNodeParams as CUgraphNodeParams
from cuda.bindings.driver import CUgraphNodeParams_st as CUgraphNodeParams_st
from cuda.bindings.driver import CUgraphNodeType as CUgraphNodeType
from cuda.bindings.driver import CUgraphRecaptureCallback as CUgraphRecaptureCallback
from cuda.bindings.driver import CUgraphRecaptureStatus as CUgraphRecaptureStatus
from cuda.bindings.driver import CUgraphicsMapResourceFlags as CUgraphicsMapResourceFlags
from cuda.bindings.driver import CUgraphicsRegisterFlags as CUgraphicsRegisterFlags
from cuda.bindings.driver import CUgraphicsResource as CUgraphicsResource
from cuda.bindings.driver import CUgreenCtx as CUgreenCtx
from cuda.bindings.driver import CUgreenCtxCreate_flags as CUgreenCtxCreate_flags
from cuda.bindings.driver import CUhostFn as CUhostFn
from cuda.bindings.driver import CUhostTaskSyncMode as CUhostTaskSyncMode
from cuda.bindings.driver import CUipcEventHandle as CUipcEventHandle
from cuda.bindings.driver import CUipcEventHandle_st as CUipcEventHandle_st
from cuda.bindings.driver import CUipcEventHandle_v1 as CUipcEventHandle_v1
from cuda.bindings.driver import CUipcMemHandle as CUipcMemHandle
from cuda.bindings.driver import CUipcMemHandle_st as CUipcMemHandle_st
from cuda.bindings.driver import CUipcMemHandle_v1 as CUipcMemHandle_v1
from cuda.bindings.driver import CUipcMem_flags as CUipcMem_flags
from cuda.bindings.driver import CUjitInputType as CUjitInputType
from cuda.bindings.driver import CUjit_cacheMode as CUjit_cacheMode
from cuda.bindings.driver import CUjit_fallback as CUjit_fallback
from cuda.bindings.driver import CUjit_option as CUjit_option
from cuda.bindings.driver import CUjit_target as CUjit_target
from cuda.bindings.driver import CUkernel as CUkernel
from cuda.bindings.driver import CUkernelNodeAttrID as CUkernelNodeAttrID
from cuda.bindings.driver import CUkernelNodeAttrValue as CUkernelNodeAttrValue
from cuda.bindings.driver import CUkernelNodeAttrValue_v1 as CUkernelNodeAttrValue_v1
from cuda.bindings.driver import CUlaunchAttribute as CUlaunchAttribute
from cuda.bindings.driver import CUlaunchAttributeID as CUlaunchAttributeID
from cuda.bindings.driver import CUlaunchAttributePortableClusterMode as CUlaunchAttributePortableClusterMode
from cuda.bindings.driver import CUlaunchAttributeValue as CUlaunchAttributeValue
from cuda.bindings.driver import CUlaunchAttributeValue_union as CUlaunchAttributeValue_union
from cuda.bindings.driver import CUlaunchAttribute_st as CUlaunchAttribute_st
from cuda.bindings.driver import CUlaunchConfig as CUlaunchConfig
from cuda.bindings.driver import CUlaunchConfig_st as CUlaunchConfig_st
from cuda.bindings.driver import CUlaunchMemSyncDomain as CUlaunchMemSyncDomain
from cuda.bindings.driver import CUlaunchMemSyncDomainMap as CUlaunchMemSyncDomainMap
from cuda.bindings.driver import CUlaunchMemSyncDomainMap_st as CUlaunchMemSyncDomainMap_st
from cuda.bindings.driver import CUlibrary as CUlibrary
from cuda.bindings.driver import CUlibraryHostUniversalFunctionAndDataTable as CUlibraryHostUniversalFunctionAndDataTable
from cuda.bindings.driver import CUlibraryHostUniversalFunctionAndDataTable_st as CUlibraryHostUniversalFunctionAndDataTable_st
from cuda.bindings.driver import CUlibraryOption as CUlibraryOption
from cuda.bindings.driver import CUlimit as CUlimit
from cuda.bindings.driver import CUlinkState as CUlinkState
from cuda.bindings.driver import CUlogIterator as CUlogIterator
from cuda.bindings.driver import CUlogLevel as CUlogLevel
from cuda.bindings.driver import CUlogicalEndpointFabricHandle as CUlogicalEndpointFabricHandle
from cuda.bindings.driver import CUlogicalEndpointFabricHandle_st as CUlogicalEndpointFabricHandle_st
from cuda.bindings.driver import CUlogicalEndpointFlag as CUlogicalEndpointFlag
from cuda.bindings.driver import CUlogicalEndpointId as CUlogicalEndpointId
from cuda.bindings.driver import CUlogicalEndpointIpcHandleType as CUlogicalEndpointIpcHandleType
from cuda.bindings.driver import CUlogicalEndpointProp as CUlogicalEndpointProp
from cuda.bindings.driver import CUlogicalEndpointProp_struct as CUlogicalEndpointProp_struct
from cuda.bindings.driver import CUlogicalEndpointType as CUlogicalEndpointType
from cuda.bindings.driver import CUlogsCallback as CUlogsCallback
from cuda.bindings.driver import CUlogsCallbackHandle as CUlogsCallbackHandle
from cuda.bindings.driver import CUmemAccessDesc as CUmemAccessDesc
from cuda.bindings.driver import CUmemAccessDesc_st as CUmemAccessDesc_st
from cuda.bindings.driver import CUmemAccessDesc_v1 as CUmemAccessDesc_v1
from cuda.bindings.driver import CUmemAccess_flags as CUmemAccess_flags
from cuda.bindings.driver import CUmemAllocationCompType as CUmemAllocationCompType
from cuda.bindings.driver import CUmemAllocationGranularity_flags as CUmemAllocationGranularity_flags
from cuda.bindings.driver import CUmemAllocationHandleType as CUmemAllocationHandleType
from cuda.bindings.driver import CUmemAllocationProp as CUmemAllocationProp
from cuda.bindings.driver import CUmemAllocationProp_st as CUmemAllocationProp_st
from cuda.bindings.driver import CUmemAllocationProp_v1 as CUmemAllocationProp_v1
from cuda.bindings.driver import CUmemAllocationType as CUmemAllocationType
from cuda.bindings.driver import CUmemAttach_flags as CUmemAttach_flags
from cuda.bindings.driver import CUmemDecompressAlgorithm as CUmemDecompressAlgorithm
from cuda.bindings.driver import CUmemDecompressParams as CUmemDecompressParams
from cuda.bindings.driver import CUmemDecompressParams_st as CUmemDecompressParams_st
from cuda.bindings.driver import CUmemFabricHandle as CUmemFabricHandle
from cuda.bindings.driver import CUmemFabricHandle_st as CUmemFabricHandle_st
from cuda.bindings.driver import CUmemFabricHandle_v1 as CUmemFabricHandle_v1
from cuda.bindings.driver import CUmemGenericAllocationHandle as CUmemGenericAllocationHandle
from cuda.bindings.driver import CUmemGenericAllocationHandle_v1 as CUmemGenericAllocationHandle_v1
from cuda.bindings.driver import CUmemHandleType as CUmemHandleType
from cuda.bindings.driver import CUmemLocation as CUmemLocation
from cuda.bindings.driver import CUmemLocationType as CUmemLocationType
from cuda.bindings.driver import CUmemLocation_st as CUmemLocation_st
from cuda.bindings.driver import CUmemLocation_v1 as CUmemLocation_v1
from cuda.bindings.driver import CUmemOperationType as CUmemOperationType
from cuda.bindings.driver import CUmemPoolProps as CUmemPoolProps
from cuda.bindings.driver import CUmemPoolProps_st as CUmemPoolProps_st
from cuda.bindings.driver import CUmemPoolProps_v1 as CUmemPoolProps_v1
from cuda.bindings.driver import CUmemPoolPtrExportData as CUmemPoolPtrExportData
from cuda.bindings.driver import CUmemPoolPtrExportData_st as CUmemPoolPtrExportData_st
from cuda.bindings.driver import CUmemPoolPtrExportData_v1 as CUmemPoolPtrExportData_v1
from cuda.bindings.driver import CUmemPool_attribute as CUmemPool_attribute
from cuda.bindings.driver import CUmemRangeFlags as CUmemRangeFlags
from cuda.bindings.driver import CUmemRangeHandleType as CUmemRangeHandleType
from cuda.bindings.driver import CUmem_advise as CUmem_advise
from cuda.bindings.driver import CUmem_range_attribute as CUmem_range_attribute
from cuda.bindings.driver import CUmemcpy3DOperand as CUmemcpy3DOperand
from cuda.bindings.driver import CUmemcpy3DOperandType as CUmemcpy3DOperandType
from cuda.bindings.driver import CUmemcpy3DOperand_st as CUmemcpy3DOperand_st
from cuda.bindings.driver import CUmemcpy3DOperand_v1 as CUmemcpy3DOperand_v1
from cuda.bindings.driver import CUmemcpyAttributes as CUmemcpyAttributes
from cuda.bindings.driver import CUmemcpyAttributes_st as CUmemcpyAttributes_st
from cuda.bindings.driver import CUmemcpyAttributes_v1 as CUmemcpyAttributes_v1
from cuda.bindings.driver import CUmemcpyFlags as CUmemcpyFlags
from cuda.bindings.driver import CUmemcpySrcAccessOrder as CUmemcpySrcAccessOrder
from cuda.bindings.driver import CUmemoryPool as CUmemoryPool
from cuda.bindings.driver import CUmemorytype as CUmemorytype
from cuda.bindings.driver import CUmipmappedArray as CUmipmappedArray
from cuda.bindings.driver import CUmodule as CUmodule
from cuda.bindings.driver import CUmoduleLoadingMode as CUmoduleLoadingMode
from cuda.bindings.driver import CUmulticastGranularity_flags as CUmulticastGranularity_flags
from cuda.bindings.driver import CUmulticastObjectProp as CUmulticastObjectProp
from cuda.bindings.driver import CUmulticastObjectProp_st as CUmulticastObjectProp_st
from cuda.bindings.driver import CUmulticastObjectProp_v1 as CUmulticastObjectProp_v1
from cuda.bindings.driver import CUoccupancyB2DSize as CUoccupancyB2DSize
from cuda.bindings.driver import CUoccupancy_flags as CUoccupancy_flags
from cuda.bindings.driver import CUoffset3D as CUoffset3D
from cuda.bindings.driver import CUoffset3D_st as CUoffset3D_st
from cuda.bindings.driver import CUoffset3D_v1 as CUoffset3D_v1
from cuda.bindings.driver import CUoutput_mode as CUoutput_mode
from cuda.bindings.driver import CUpointer_attribute as CUpointer_attribute
from cuda.bindings.driver import CUprocessState as CUprocessState
from cuda.bindings.driver import CUresourceViewFormat as CUresourceViewFormat
from cuda.bindings.driver import CUresourcetype as CUresourcetype
from cuda.bindings.driver import CUresult as CUresult
from cuda.bindings.driver import CUsharedMemoryMode as CUsharedMemoryMode
from cuda.bindings.driver import CUshared_carveout as CUshared_carveout
from cuda.bindings.driver import CUsharedconfig as CUsharedconfig
from cuda.bindings.driver import CUstream as CUstream
from cuda.bindings.driver import CUstreamAtomicReductionDataType as CUstreamAtomicReductionDataType
from cuda.bindings.driver import CUstreamAtomicReductionOpType as CUstreamAtomicReductionOpType
from cuda.bindings.driver import CUstreamAttrID as CUstreamAttrID
from cuda.bindings.driver import CUstreamAttrValue as CUstreamAttrValue
from cuda.bindings.driver import CUstreamAttrValue_v1 as CUstreamAttrValue_v1
from cuda.bindings.driver import CUstreamBatchMemOpParams as CUstreamBatchMemOpParams
from cuda.bindings.driver import CUstreamBatchMemOpParams_union as CUstreamBatchMemOpParams_union
from cuda.bindings.driver import CUstreamBatchMemOpParams_v1 as CUstreamBatchMemOpParams_v1
from cuda.bindings.driver import CUstreamBatchMemOpType as CUstreamBatchMemOpType
from cuda.bindings.driver import CUstreamCallback as CUstreamCallback
from cuda.bindings.driver import CUstreamCaptureMode as CUstreamCaptureMode
from cuda.bindings.driver import CUstreamCaptureStatus as CUstreamCaptureStatus
from cuda.bindings.driver import CUstreamCigCaptureParams as CUstreamCigCaptureParams
from cuda.bindings.driver import CUstreamCigCaptureParams_st as CUstreamCigCaptureParams_st
from cuda.bindings.driver import CUstreamCigDataType as CUstreamCigDataType
from cuda.bindings.driver import CUstreamCigParam as CUstreamCigParam
from cuda.bindings.driver import CUstreamCigParam_st as CUstreamCigParam_st
from cuda.bindings.driver import CUstreamMemOpAtomicReductionParams_st as CUstreamMemOpAtomicReductionParams_st
from cuda.bindings.driver import CUstreamMemOpFlushRemoteWritesParams_st as CUstreamMemOpFlushRemoteWritesParams_st
from cuda.bindings.driver import CUstreamMemOpMemoryBarrierParams_st as CUstreamMemOpMemoryBarrierParams_st
from cuda.bindings.driver import CUstreamMemOpWaitValueParams_st as CUstreamMemOpWaitValueParams_st
from cuda.bindings.driver import CUstreamMemOpWriteValueParams_st as CUstreamMemOpWriteValueParams_st
from cuda.bindings.driver import CUstreamMemoryBarrier_flags as CUstreamMemoryBarrier_flags
from cuda.bindings.driver import CUstreamUpdateCaptureDependencies_flags as CUstreamUpdateCaptureDependencies_flags
from cuda.bindings.driver import CUstreamWaitValue_flags as CUstreamWaitValue_flags
from cuda.bindings.driver import CUstreamWriteValue_flags as CUstreamWriteValue_flags
from cuda.bindings.driver import CUstream_flags as CUstream_flags
from cuda.bindings.driver import CUsurfObject as CUsurfObject
from cuda.bindings.driver import CUsurfObject_v1 as CUsurfObject_v1
from cuda.bindings.driver import CUsurfref as CUsurfref
from cuda.bindings.driver import CUsynchronizationPolicy as CUsynchronizationPolicy
from cuda.bindings.driver import CUtensorMap as CUtensorMap
from cuda.bindings.driver import CUtensorMapAllocClass as CUtensorMapAllocClass
from cuda.bindings.driver import CUtensorMapDataType as CUtensorMapDataType
from cuda.bindings.driver import CUtensorMapFloatOOBfill as CUtensorMapFloatOOBfill
from cuda.bindings.driver import CUtensorMapIm2ColWideMode as CUtensorMapIm2ColWideMode
from cuda.bindings.driver import CUtensorMapInterleave as CUtensorMapInterleave
from cuda.bindings.driver import CUtensorMapL2promotion as CUtensorMapL2promotion
from cuda.bindings.driver import CUtensorMapSwizzle as CUtensorMapSwizzle
from cuda.bindings.driver import CUtensorMap_st as CUtensorMap_st
from cuda.bindings.driver import CUtexObject as CUtexObject
from cuda.bindings.driver import CUtexObject_v1 as CUtexObject_v1
from cuda.bindings.driver import CUtexref as CUtexref
from cuda.bindings.driver import CUuserObject as CUuserObject
from cuda.bindings.driver import CUuserObjectRetain_flags as CUuserObjectRetain_flags
from cuda.bindings.driver import CUuserObject_flags as CUuserObject_flags
from cuda.bindings.driver import CUuuid as CUuuid
from cuda.bindings.driver import CUuuid_st as CUuuid_st
from cuda.bindings.driver import EGLImageKHR as EGLImageKHR
from cuda.bindings.driver import EGLStreamKHR as EGLStreamKHR
from cuda.bindings.driver import EGLSyncKHR as EGLSyncKHR
from cuda.bindings.driver import EGLint as EGLint
from cuda.bindings.driver import GLenum as GLenum
from cuda.bindings.driver import GLuint as GLuint
from cuda.bindings.driver import VdpDevice as VdpDevice
from cuda.bindings.driver import VdpGetProcAddress as VdpGetProcAddress
from cuda.bindings.driver import VdpOutputSurface as VdpOutputSurface
from cuda.bindings.driver import VdpVideoSurface as VdpVideoSurface
from cuda.bindings.driver import anon_struct0 as anon_struct0
from cuda.bindings.driver import anon_struct1 as anon_struct1
from cuda.bindings.driver import anon_struct10 as anon_struct10
from cuda.bindings.driver import anon_struct11 as anon_struct11
from cuda.bindings.driver import anon_struct12 as anon_struct12
from cuda.bindings.driver import anon_struct13 as anon_struct13
from cuda.bindings.driver import anon_struct14 as anon_struct14
from cuda.bindings.driver import anon_struct15 as anon_struct15
from cuda.bindings.driver import anon_struct16 as anon_struct16
from cuda.bindings.driver import anon_struct17 as anon_struct17
from cuda.bindings.driver import anon_struct18 as anon_struct18
from cuda.bindings.driver import anon_struct19 as anon_struct19
from cuda.bindings.driver import anon_struct2 as anon_struct2
from cuda.bindings.driver import anon_struct20 as anon_struct20
from cuda.bindings.driver import anon_struct21 as anon_struct21
from cuda.bindings.driver import anon_struct22 as anon_struct22
from cuda.bindings.driver import anon_struct23 as anon_struct23
from cuda.bindings.driver import anon_struct24 as anon_struct24
from cuda.bindings.driver import anon_struct25 as anon_struct25
from cuda.bindings.driver import anon_struct26 as anon_struct26
from cuda.bindings.driver import anon_struct27 as anon_struct27
from cuda.bindings.driver import anon_struct28 as anon_struct28
from cuda.bindings.driver import anon_struct29 as anon_struct29
from cuda.bindings.driver import anon_struct3 as anon_struct3
from cuda.bindings.driver import anon_struct4 as anon_struct4
from cuda.bindings.driver import anon_struct5 as anon_struct5
from cuda.bindings.driver import anon_struct6 as anon_struct6
from cuda.bindings.driver import anon_struct7 as anon_struct7
from cuda.bindings.driver import anon_struct8 as anon_struct8
from cuda.bindings.driver import anon_struct9 as anon_struct9
from cuda.bindings.driver import anon_union12 as anon_union12
from cuda.bindings.driver import anon_union13 as anon_union13
from cuda.bindings.driver import anon_union14 as anon_union14
from cuda.bindings.driver import anon_union16 as anon_union16
from cuda.bindings.driver import anon_union2 as anon_union2
from cuda.bindings.driver import anon_union22 as anon_union22
from cuda.bindings.driver import anon_union24 as anon_union24
from cuda.bindings.driver import anon_union4 as anon_union4
from cuda.bindings.driver import anon_union5 as anon_union5
from cuda.bindings.driver import anon_union6 as anon_union6
from cuda.bindings.driver import anon_union7 as anon_union7
from cuda.bindings.driver import anon_union8 as anon_union8
from cuda.bindings.driver import anon_union9 as anon_union9
from cuda.bindings.driver import cl_context_flags as cl_context_flags
from cuda.bindings.driver import cl_event_flags as cl_event_flags
from cuda.bindings.driver import cudaBindingsDriverGlobal as cudaBindingsDriverGlobal
from cuda.bindings.driver import cuuint32_t as cuuint32_t
from cuda.bindings.driver import cuuint64_t as cuuint64_t

CUDA_ARRAY3D_2DARRAY: int
CUDA_ARRAY3D_COLOR_ATTACHMENT: int
CUDA_ARRAY3D_CUBEMAP: int
CUDA_ARRAY3D_DEFERRED_MAPPING: int
CUDA_ARRAY3D_DEPTH_TEXTURE: int
CUDA_ARRAY3D_LAYERED: int
CUDA_ARRAY3D_SPARSE: int
CUDA_ARRAY3D_SURFACE_LDST: int
CUDA_ARRAY3D_TEXTURE_GATHER: int
CUDA_ARRAY3D_VIDEO_ENCODE_DECODE: int
CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_POST_LAUNCH_SYNC: int
CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_PRE_LAUNCH_SYNC: int
CUDA_EGL_INFINITE_TIMEOUT: int
CUDA_EXTERNAL_MEMORY_DEDICATED: int
CUDA_EXTERNAL_SEMAPHORE_SIGNAL_SKIP_NVSCIBUF_MEMSYNC: int
CUDA_EXTERNAL_SEMAPHORE_WAIT_SKIP_NVSCIBUF_MEMSYNC: int
CUDA_NVSCISYNC_ATTR_SIGNAL: int
CUDA_NVSCISYNC_ATTR_WAIT: int
CUDA_VERSION: int
CU_ARRAY_SPARSE_PROPERTIES_SINGLE_MIPTAIL: int
CU_COMPUTE_ACCELERATED_TARGET_BASE: int
CU_COMPUTE_FAMILY_TARGET_BASE: int
CU_DEVICE_CPU: int
CU_DEVICE_INVALID: int
CU_DEV_SM_RESOURCE_GROUP_LOCALITY_DOMAIN_ID_ANY: int
CU_GRAPH_COND_ASSIGN_DEFAULT: int
CU_GRAPH_KERNEL_NODE_PORT_DEFAULT: int
CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER: int
CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC: int
CU_IPC_HANDLE_SIZE: int
CU_KERNEL_NODE_ATTRIBUTE_ACCESS_POLICY_WINDOW: int
CU_KERNEL_NODE_ATTRIBUTE_CLUSTER_DIMENSION: int
CU_KERNEL_NODE_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: int
CU_KERNEL_NODE_ATTRIBUTE_COOPERATIVE: int
CU_KERNEL_NODE_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE: int
CU_KERNEL_NODE_ATTRIBUTE_MEM_SYNC_DOMAIN: int
CU_KERNEL_NODE_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: int
CU_KERNEL_NODE_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION: int
CU_KERNEL_NODE_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: int
CU_KERNEL_NODE_ATTRIBUTE_PRIORITY: int
CU_LAUNCH_KERNEL_REQUIRED_BLOCK_DIM: int
CU_LAUNCH_PARAM_BUFFER_POINTER: int
CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT: int
CU_LAUNCH_PARAM_BUFFER_SIZE: int
CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT: int
CU_LAUNCH_PARAM_END: int
CU_LAUNCH_PARAM_END_AS_INT: int
CU_MEMHOSTALLOC_DEVICEMAP: int
CU_MEMHOSTALLOC_PORTABLE: int
CU_MEMHOSTALLOC_WRITECOMBINED: int
CU_MEMHOSTREGISTER_DEVICEMAP: int
CU_MEMHOSTREGISTER_IOMEMORY: int
CU_MEMHOSTREGISTER_PORTABLE: int
CU_MEMHOSTREGISTER_READ_ONLY: int
CU_MEM_CREATE_USAGE_GPU_DIRECT_RDMA_OVER_PCIE: int
CU_MEM_CREATE_USAGE_HW_DECOMPRESS: int
CU_MEM_CREATE_USAGE_TILE_POOL: int
CU_MEM_POOL_CREATE_USAGE_HW_DECOMPRESS: int
CU_PARAM_TR_DEFAULT: int
CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW: int
CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN: int
CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: int
CU_STREAM_ATTRIBUTE_PRIORITY: int
CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY: int
CU_STREAM_LEGACY: int
CU_STREAM_PER_THREAD: int
CU_TENSOR_MAP_NUM_QWORDS: int
CU_TRSA_OVERRIDE_FORMAT: int
CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION: int
CU_TRSF_NORMALIZED_COORDINATES: int
CU_TRSF_READ_AS_INTEGER: int
CU_TRSF_SEAMLESS_CUBEMAP: int
CU_TRSF_SRGB: int
MAX_PLANES: int

def cuArray3DCreate(pAllocateArray: CUDA_ARRAY3D_DESCRIPTOR | None) -> CUarray: ...
def cuArray3DGetDescriptor(hArray: CUarray | SupportsInt | None) -> CUDA_ARRAY3D_DESCRIPTOR: ...
def cuArrayCreate(pAllocateArray: CUDA_ARRAY_DESCRIPTOR | None) -> CUarray: ...
def cuArrayDestroy(hArray: CUarray | SupportsInt | None) -> None: ...
def cuArrayGetDescriptor(hArray: CUarray | SupportsInt | None) -> CUDA_ARRAY_DESCRIPTOR: ...
def cuArrayGetMemoryRequirements(
    array: CUarray | SupportsInt | None,
    device: CUdevice | SupportsInt | None,
) -> CUDA_ARRAY_MEMORY_REQUIREMENTS: ...
def cuArrayGetPlane(hArray: CUarray | SupportsInt | None, planeIdx: int) -> CUarray: ...
def cuArrayGetSparseProperties(
    array: CUarray | SupportsInt | None,
) -> CUDA_ARRAY_SPARSE_PROPERTIES: ...
def cuCheckpointOperationComplete(
    handle: CUcheckpointOperationHandle | SupportsInt | None,
) -> None: ...
def cuCheckpointProcessCheckpoint(pid: int, args: CUcheckpointCheckpointArgs | None) -> None: ...
def cuCheckpointProcessGetRestoreThreadId(pid: int) -> int: ...
def cuCheckpointProcessGetState(pid: int) -> CUprocessState: ...
def cuCheckpointProcessLock(pid: int, args: CUcheckpointLockArgs | None) -> None: ...
def cuCheckpointProcessRestore(pid: int, args: CUcheckpointRestoreArgs | None) -> None: ...
def cuCheckpointProcessUnlock(pid: int, args: CUcheckpointUnlockArgs | None) -> None: ...
def cuCoredumpDeregisterCompleteCallback(
    callback: CUcoredumpCallbackHandle | SupportsInt | None,
) -> None: ...
def cuCoredumpDeregisterStartCallback(
    callback: CUcoredumpCallbackHandle | SupportsInt | None,
) -> None: ...
def cuCoredumpGetAttribute(attrib: CUcoredumpSettings) -> Any: ...
def cuCoredumpGetAttributeGlobal(attrib: CUcoredumpSettings) -> Any: ...
def cuCoredumpRegisterCompleteCallback(
    callback: CUcoredumpStatusCallback | SupportsInt | None,
    userData: Any,
) -> CUcoredumpCallbackHandle: ...
def cuCoredumpRegisterStartCallback(
    callback: CUcoredumpStatusCallback | SupportsInt | None,
    userData: Any,
) -> CUcoredumpCallbackHandle: ...
def cuCoredumpSetAttribute(attrib: CUcoredumpSettings, value: Any) -> None: ...
def cuCoredumpSetAttributeGlobal(attrib: CUcoredumpSettings, value: Any) -> None: ...
def cuCtxAttach(flags: int) -> CUcontext: ...
def cuCtxCreate(
    ctxCreateParams: CUctxCreateParams | None,
    flags: int,
    dev: CUdevice | SupportsInt | None,
) -> CUcontext: ...
def cuCtxDestroy(ctx: CUcontext | SupportsInt | None) -> None: ...
def cuCtxDetach(ctx: CUcontext | SupportsInt | None) -> None: ...
def cuCtxDisablePeerAccess(peerContext: CUcontext | SupportsInt | None) -> None: ...
def cuCtxEnablePeerAccess(peerContext: CUcontext | SupportsInt | None, Flags: int) -> None: ...
def cuCtxFromGreenCtx(hCtx: CUgreenCtx | SupportsInt | None) -> CUcontext: ...
def cuCtxGetApiVersion(ctx: CUcontext | SupportsInt | None) -> int: ...
def cuCtxGetCacheConfig() -> CUfunc_cache: ...
def cuCtxGetCurrent() -> CUcontext: ...
def cuCtxGetDevResource(
    hCtx: CUcontext | SupportsInt | None,
    typename: CUdevResourceType,
) -> CUdevResource: ...
def cuCtxGetDevice() -> CUdevice: ...
def cuCtxGetDevice_v2(ctx: CUcontext | SupportsInt | None) -> CUdevice: ...
def cuCtxGetExecAffinity(typename: CUexecAffinityType) -> CUexecAffinityParam: ...
def cuCtxGetFlags() -> int: ...
def cuCtxGetId(ctx: CUcontext | SupportsInt | None) -> int: ...
def cuCtxGetLimit(limit: CUlimit) -> int: ...
def cuCtxGetSharedMemConfig() -> CUsharedconfig: ...
def cuCtxGetStreamPriorityRange() -> tuple[int, int]: ...
def cuCtxPopCurrent() -> CUcontext: ...
def cuCtxPushCurrent(ctx: CUcontext | SupportsInt | None) -> None: ...
def cuCtxRecordEvent(
    hCtx: CUcontext | SupportsInt | None,
    hEvent: CUevent | SupportsInt | None,
) -> None: ...
def cuCtxResetPersistingL2Cache() -> None: ...
def cuCtxSetCacheConfig(config: CUfunc_cache) -> None: ...
def cuCtxSetCurrent(ctx: CUcontext | SupportsInt | None) -> None: ...
def cuCtxSetFlags(flags: int) -> None: ...
def cuCtxSetLimit(limit: CUlimit, value: int) -> None: ...
def cuCtxSetSharedMemConfig(config: CUsharedconfig) -> None: ...
def cuCtxSynchronize() -> None: ...
def cuCtxSynchronize_v2(ctx: CUcontext | SupportsInt | None) -> None: ...
def cuCtxWaitEvent(
    hCtx: CUcontext | SupportsInt | None,
    hEvent: CUevent | SupportsInt | None,
) -> None: ...
def cuDestroyExternalMemory(extMem: CUexternalMemory | SupportsInt | None) -> None: ...
def cuDestroyExternalSemaphore(extSem: CUexternalSemaphore | SupportsInt | None) -> None: ...
def cuDevResourceGenerateDesc(
    resources: tuple[CUdevResource, ...] | list[CUdevResource] | None,
    nbResources: int,
) -> CUdevResourceDesc: ...
def cuDevSmResourceSplit(
    nbGroups: int,
    input_: CUdevResource | None,
    flags: int,
    groupParams: tuple[CU_DEV_SM_RESOURCE_GROUP_PARAMS, ...] | list[CU_DEV_SM_RESOURCE_GROUP_PARAMS] | None,
) -> tuple[list[CUdevResource], CUdevResource]: ...
def cuDevSmResourceSplitByCount(
    nbGroups: int,
    input_: CUdevResource | None,
    flags: int,
    minCount: int,
) -> tuple[list[CUdevResource], int, CUdevResource]: ...
def cuDeviceCanAccessPeer(
    dev: CUdevice | SupportsInt | None,
    peerDev: CUdevice | SupportsInt | None,
) -> int: ...
def cuDeviceComputeCapability(dev: CUdevice | SupportsInt | None) -> tuple[int, int]: ...
def cuDeviceGet(ordinal: int) -> CUdevice: ...
def cuDeviceGetAttribute(attrib: CUdevice_attribute, dev: CUdevice | SupportsInt | None) -> int: ...
def cuDeviceGetByPCIBusId(pciBusId: bytes) -> CUdevice: ...
def cuDeviceGetCliqueCount(dev: CUdevice | SupportsInt | None) -> int: ...
def cuDeviceGetCliqueInfo(
    count: int,
    dev: CUdevice | SupportsInt | None,
) -> tuple[list[CUcliqueInfo], int]: ...
def cuDeviceGetCount() -> int: ...
def cuDeviceGetDefaultMemPool(dev: CUdevice | SupportsInt | None) -> CUmemoryPool: ...
def cuDeviceGetDevResource(
    device: CUdevice | SupportsInt | None,
    typename: CUdevResourceType,
) -> CUdevResource: ...
def cuDeviceGetExecAffinitySupport(
    typename: CUexecAffinityType,
    dev: CUdevice | SupportsInt | None,
) -> int: ...
def cuDeviceGetFabricClusterUuid(dev: CUdevice | SupportsInt | None) -> CUuuid: ...
def cuDeviceGetGraphMemAttribute(
    device: CUdevice | SupportsInt | None,
    attr: CUgraphMem_attribute,
) -> Any: ...
def cuDeviceGetHostAtomicCapabilities(
    operations: tuple[CUatomicOperation, ...] | list[CUatomicOperation] | None,
    count: int,
    dev: CUdevice | SupportsInt | None,
) -> list[int]: ...
def cuDeviceGetLuid(dev: CUdevice | SupportsInt | None) -> tuple[bytes, int]: ...
def cuDeviceGetMemPool(dev: CUdevice | SupportsInt | None) -> CUmemoryPool: ...
def cuDeviceGetName(length: int, dev: CUdevice | SupportsInt | None) -> bytes: ...
def cuDeviceGetNvSciSyncAttributes(
    nvSciSyncAttrList: Any,
    dev: CUdevice | SupportsInt | None,
    flags: int,
) -> None: ...
def cuDeviceGetP2PAtomicCapabilities(
    operations: tuple[CUatomicOperation, ...] | list[CUatomicOperation] | None,
    count: int,
    srcDevice: CUdevice | SupportsInt | None,
    dstDevice: CUdevice | SupportsInt | None,
) -> list[int]: ...
def cuDeviceGetP2PAttribute(
    attrib: CUdevice_P2PAttribute,
    srcDevice: CUdevice | SupportsInt | None,
    dstDevice: CUdevice | SupportsInt | None,
) -> int: ...
def cuDeviceGetPCIBusId(length: int, dev: CUdevice | SupportsInt | None) -> bytes: ...
def cuDeviceGetProperties(dev: CUdevice | SupportsInt | None) -> CUdevprop: ...
def cuDeviceGetTexture1DLinearMaxWidth(
    pformat: CUarray_format,
    numChannels: int,
    dev: CUdevice | SupportsInt | None,
) -> int: ...
def cuDeviceGetUuid(dev: CUdevice | SupportsInt | None) -> CUuuid: ...
def cuDeviceGraphMemTrim(device: CUdevice | SupportsInt | None) -> None: ...
def cuDevicePrimaryCtxGetState(dev: CUdevice | SupportsInt | None) -> tuple[int, int]: ...
def cuDevicePrimaryCtxRelease(dev: CUdevice | SupportsInt | None) -> None: ...
def cuDevicePrimaryCtxReset(dev: CUdevice | SupportsInt | None) -> None: ...
def cuDevicePrimaryCtxRetain(dev: CUdevice | SupportsInt | None) -> CUcontext: ...
def cuDevicePrimaryCtxSetFlags(dev: CUdevice | SupportsInt | None, flags: int) -> None: ...
def cuDeviceRegisterAsyncNotification(
    device: CUdevice | SupportsInt | None,
    callbackFunc: CUasyncCallback | SupportsInt | None,
    userData: Any,
) -> CUasyncCallbackHandle: ...
def cuDeviceSetGraphMemAttribute(
    device: CUdevice | SupportsInt | None,
    attr: CUgraphMem_attribute,
    value: Any,
) -> None: ...
def cuDeviceSetMemPool(
    dev: CUdevice | SupportsInt | None,
    pool: CUmemoryPool | SupportsInt | None,
) -> None: ...
def cuDeviceTotalMem(dev: CUdevice | SupportsInt | None) -> int: ...
def cuDeviceUnregisterAsyncNotification(
    device: CUdevice | SupportsInt | None,
    callback: CUasyncCallbackHandle | SupportsInt | None,
) -> None: ...
def cuDriverGetVersion() -> int: ...
def cuEGLStreamConsumerAcquireFrame(
    conn: CUeglStreamConnection | SupportsInt | None,
    pCudaResource: CUgraphicsResource | SupportsInt | None,
    pStream: CUstream | SupportsInt | None,
    timeout: int,
) -> None: ...
def cuEGLStreamConsumerConnect(
    stream: EGLStreamKHR | SupportsInt | None,
) -> CUeglStreamConnection: ...
def cuEGLStreamConsumerConnectWithFlags(
    stream: EGLStreamKHR | SupportsInt | None,
    flags: int,
) -> CUeglStreamConnection: ...
def cuEGLStreamConsumerDisconnect(conn: CUeglStreamConnection | SupportsInt | None) -> None: ...
def cuEGLStreamConsumerReleaseFrame(
    conn: CUeglStreamConnection | SupportsInt | None,
    pCudaResource: CUgraphicsResource | SupportsInt | None,
    pStream: CUstream | SupportsInt | None,
) -> None: ...
def cuEGLStreamProducerConnect(
    stream: EGLStreamKHR | SupportsInt | None,
    width: EGLint | SupportsInt | None,
    height: EGLint | SupportsInt | None,
) -> CUeglStreamConnection: ...
def cuEGLStreamProducerDisconnect(conn: CUeglStreamConnection | SupportsInt | None) -> None: ...
def cuEGLStreamProducerPresentFrame(
    conn: CUeglStreamConnection | SupportsInt | None,
    eglframe: CUeglFrame,
    pStream: CUstream | SupportsInt | None,
) -> None: ...
def cuEGLStreamProducerReturnFrame(
    conn: CUeglStreamConnection | SupportsInt | None,
    eglframe: CUeglFrame | None,
    pStream: CUstream | SupportsInt | None,
) -> None: ...
def cuEventCreate(Flags: int) -> CUevent: ...
def cuEventCreateFromEGLSync(eglSync: EGLSyncKHR | SupportsInt | None, flags: int) -> CUevent: ...
def cuEventDestroy(hEvent: CUevent | SupportsInt | None) -> None: ...
def cuEventElapsedTime(
    hStart: CUevent | SupportsInt | None,
    hEnd: CUevent | SupportsInt | None,
) -> float: ...
def cuEventQuery(hEvent: CUevent | SupportsInt | None) -> None: ...
def cuEventRecord(
    hEvent: CUevent | SupportsInt | None,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuEventRecordWithFlags(
    hEvent: CUevent | SupportsInt | None,
    hStream: CUstream | SupportsInt | None,
    flags: int,
) -> None: ...
def cuEventSynchronize(hEvent: CUevent | SupportsInt | None) -> None: ...
def cuExternalMemoryGetMappedBuffer(
    extMem: CUexternalMemory | SupportsInt | None,
    bufferDesc: CUDA_EXTERNAL_MEMORY_BUFFER_DESC | None,
) -> CUdeviceptr: ...
def cuExternalMemoryGetMappedMipmappedArray(
    extMem: CUexternalMemory | SupportsInt | None,
    mipmapDesc: CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC | None,
) -> CUmipmappedArray: ...
def cuFabricCpyBatchAsync(
    numOps: int,
    opList: tuple[CUDA_FABRIC_COPY_BATCH_OP, ...] | list[CUDA_FABRIC_COPY_BATCH_OP] | None,
    flags: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuFlushGPUDirectRDMAWrites(
    target: CUflushGPUDirectRDMAWritesTarget,
    scope: CUflushGPUDirectRDMAWritesScope,
) -> None: ...
def cuFuncGetAttribute(
    attrib: CUfunction_attribute,
    hfunc: CUfunction | SupportsInt | None,
) -> int: ...
def cuFuncGetModule(hfunc: CUfunction | SupportsInt | None) -> CUmodule: ...
def cuFuncGetName(hfunc: CUfunction | SupportsInt | None) -> bytes: ...
def cuFuncGetParamCount(func: CUfunction | SupportsInt | None) -> int: ...
def cuFuncGetParamInfo(
    func: CUfunction | SupportsInt | None,
    paramIndex: int,
) -> tuple[int, int]: ...
def cuFuncIsLoaded(function: CUfunction | SupportsInt | None) -> CUfunctionLoadingState: ...
def cuFuncLoad(function: CUfunction | SupportsInt | None) -> None: ...
def cuFuncSetAttribute(
    hfunc: CUfunction | SupportsInt | None,
    attrib: CUfunction_attribute,
    value: int,
) -> None: ...
def cuFuncSetBlockShape(hfunc: CUfunction | SupportsInt | None, x: int, y: int, z: int) -> None: ...
def cuFuncSetCacheConfig(hfunc: CUfunction | SupportsInt | None, config: CUfunc_cache) -> None: ...
def cuFuncSetSharedMemConfig(
    hfunc: CUfunction | SupportsInt | None,
    config: CUsharedconfig,
) -> None: ...
def cuFuncSetSharedSize(hfunc: CUfunction | SupportsInt | None, numbytes: int) -> None: ...
def cuGLGetDevices(
    cudaDeviceCount: int,
    deviceList: CUGLDeviceList,
) -> tuple[int, list[CUdevice]]: ...
def cuGetErrorName(error: CUresult) -> bytes: ...
def cuGetErrorString(error: CUresult) -> bytes: ...
def cuGetExportTable(pExportTableId: CUuuid | None) -> Any: ...
def cuGetProcAddress(
    symbol: bytes,
    cudaVersion: int,
    flags: Any,
) -> tuple[Any, CUdriverProcAddressQueryResult]: ...
def cuGraphAddBatchMemOpNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    numDependencies: int,
    nodeParams: CUDA_BATCH_MEM_OP_NODE_PARAMS | None,
) -> CUgraphNode: ...
def cuGraphAddChildGraphNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    numDependencies: int,
    childGraph: CUgraph | SupportsInt | None,
) -> CUgraphNode: ...
def cuGraphAddDependencies(
    hGraph: CUgraph | SupportsInt | None,
    from_: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    to: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    edgeData: tuple[CUgraphEdgeData, ...] | list[CUgraphEdgeData] | None,
    numDependencies: int,
) -> None: ...
def cuGraphAddEmptyNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    numDependencies: int,
) -> CUgraphNode: ...
def cuGraphAddEventRecordNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    numDependencies: int,
    event: CUevent | SupportsInt | None,
) -> CUgraphNode: ...
def cuGraphAddEventWaitNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    numDependencies: int,
    event: CUevent | SupportsInt | None,
) -> CUgraphNode: ...
def cuGraphAddExternalSemaphoresSignalNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    numDependencies: int,
    nodeParams: CUDA_EXT_SEM_SIGNAL_NODE_PARAMS | None,
) -> CUgraphNode: ...
def cuGraphAddExternalSemaphoresWaitNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    numDependencies: int,
    nodeParams: CUDA_EXT_SEM_WAIT_NODE_PARAMS | None,
) -> CUgraphNode: ...
def cuGraphAddHostNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    numDependencies: int,
    nodeParams: CUDA_HOST_NODE_PARAMS | None,
) -> CUgraphNode: ...
def cuGraphAddKernelNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    numDependencies: int,
    nodeParams: CUDA_KERNEL_NODE_PARAMS | None,
) -> CUgraphNode: ...
def cuGraphAddMemAllocNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    numDependencies: int,
    nodeParams: CUDA_MEM_ALLOC_NODE_PARAMS | None,
) -> CUgraphNode: ...
def cuGraphAddMemFreeNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    numDependencies: int,
    dptr: CUdeviceptr | SupportsInt | None,
) -> CUgraphNode: ...
def cuGraphAddMemcpyNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    numDependencies: int,
    copyParams: CUDA_MEMCPY3D | None,
    ctx: CUcontext | SupportsInt | None,
) -> CUgraphNode: ...
def cuGraphAddMemsetNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    numDependencies: int,
    memsetParams: CUDA_MEMSET_NODE_PARAMS | None,
    ctx: CUcontext | SupportsInt | None,
) -> CUgraphNode: ...
def cuGraphAddNode(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    dependencyData: tuple[CUgraphEdgeData, ...] | list[CUgraphEdgeData] | None,
    numDependencies: int,
    nodeParams: CUgraphNodeParams | None,
) -> CUgraphNode: ...
def cuGraphAddNode_v3(
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    dependencyData: tuple[CUgraphEdgeData, ...] | list[CUgraphEdgeData] | None,
    numDependencies: int,
    nodeParams: CUgraphNodeParams | None,
) -> CUgraphNode: ...
def cuGraphBatchMemOpNodeGetParams(
    hNode: CUgraphNode | SupportsInt | None,
) -> CUDA_BATCH_MEM_OP_NODE_PARAMS: ...
def cuGraphBatchMemOpNodeSetParams(
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUDA_BATCH_MEM_OP_NODE_PARAMS | None,
) -> None: ...
def cuGraphChildGraphNodeGetGraph(hNode: CUgraphNode | SupportsInt | None) -> CUgraph: ...
def cuGraphClone(originalGraph: CUgraph | SupportsInt | None) -> CUgraph: ...
def cuGraphConditionalHandleCreate(
    hGraph: CUgraph | SupportsInt | None,
    ctx: CUcontext | SupportsInt | None,
    defaultLaunchValue: int,
    flags: int,
) -> CUgraphConditionalHandle: ...
def cuGraphCreate(flags: int) -> CUgraph: ...
def cuGraphDebugDotPrint(hGraph: CUgraph | SupportsInt | None, path: bytes, flags: int) -> None: ...
def cuGraphDestroy(hGraph: CUgraph | SupportsInt | None) -> None: ...
def cuGraphDestroyNode(hNode: CUgraphNode | SupportsInt | None) -> None: ...
def cuGraphEventRecordNodeGetEvent(hNode: CUgraphNode | SupportsInt | None) -> CUevent: ...
def cuGraphEventRecordNodeSetEvent(
    hNode: CUgraphNode | SupportsInt | None,
    event: CUevent | SupportsInt | None,
) -> None: ...
def cuGraphEventWaitNodeGetEvent(hNode: CUgraphNode | SupportsInt | None) -> CUevent: ...
def cuGraphEventWaitNodeSetEvent(
    hNode: CUgraphNode | SupportsInt | None,
    event: CUevent | SupportsInt | None,
) -> None: ...
def cuGraphExecBatchMemOpNodeSetParams(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUDA_BATCH_MEM_OP_NODE_PARAMS | None,
) -> None: ...
def cuGraphExecChildGraphNodeSetParams(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hNode: CUgraphNode | SupportsInt | None,
    childGraph: CUgraph | SupportsInt | None,
) -> None: ...
def cuGraphExecDestroy(hGraphExec: CUgraphExec | SupportsInt | None) -> None: ...
def cuGraphExecEventRecordNodeSetEvent(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hNode: CUgraphNode | SupportsInt | None,
    event: CUevent | SupportsInt | None,
) -> None: ...
def cuGraphExecEventWaitNodeSetEvent(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hNode: CUgraphNode | SupportsInt | None,
    event: CUevent | SupportsInt | None,
) -> None: ...
def cuGraphExecExternalSemaphoresSignalNodeSetParams(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUDA_EXT_SEM_SIGNAL_NODE_PARAMS | None,
) -> None: ...
def cuGraphExecExternalSemaphoresWaitNodeSetParams(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUDA_EXT_SEM_WAIT_NODE_PARAMS | None,
) -> None: ...
def cuGraphExecGetFlags(hGraphExec: CUgraphExec | SupportsInt | None) -> cuuint64_t: ...
def cuGraphExecGetId(hGraphExec: CUgraphExec | SupportsInt | None) -> int: ...
def cuGraphExecHostNodeSetParams(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUDA_HOST_NODE_PARAMS | None,
) -> None: ...
def cuGraphExecKernelNodeSetParams(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUDA_KERNEL_NODE_PARAMS | None,
) -> None: ...
def cuGraphExecMemcpyNodeSetParams(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hNode: CUgraphNode | SupportsInt | None,
    copyParams: CUDA_MEMCPY3D | None,
    ctx: CUcontext | SupportsInt | None,
) -> None: ...
def cuGraphExecMemsetNodeSetParams(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hNode: CUgraphNode | SupportsInt | None,
    memsetParams: CUDA_MEMSET_NODE_PARAMS | None,
    ctx: CUcontext | SupportsInt | None,
) -> None: ...
def cuGraphExecNodeSetParams(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUgraphNodeParams | None,
) -> None: ...
def cuGraphExecUpdate(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hGraph: CUgraph | SupportsInt | None,
) -> CUgraphExecUpdateResultInfo: ...
def cuGraphExternalSemaphoresSignalNodeGetParams(
    hNode: CUgraphNode | SupportsInt | None,
) -> CUDA_EXT_SEM_SIGNAL_NODE_PARAMS: ...
def cuGraphExternalSemaphoresSignalNodeSetParams(
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUDA_EXT_SEM_SIGNAL_NODE_PARAMS | None,
) -> None: ...
def cuGraphExternalSemaphoresWaitNodeGetParams(
    hNode: CUgraphNode | SupportsInt | None,
) -> CUDA_EXT_SEM_WAIT_NODE_PARAMS: ...
def cuGraphExternalSemaphoresWaitNodeSetParams(
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUDA_EXT_SEM_WAIT_NODE_PARAMS | None,
) -> None: ...
def cuGraphGetEdges(
    hGraph: CUgraph | SupportsInt | None,
    numEdges: int = 0,
) -> tuple[list[CUgraphNode], list[CUgraphNode], list[CUgraphEdgeData], int]: ...
def cuGraphGetId(hGraph: CUgraph | SupportsInt | None) -> int: ...
def cuGraphGetNodes(
    hGraph: CUgraph | SupportsInt | None,
    numNodes: int = 0,
) -> tuple[list[CUgraphNode], int]: ...
def cuGraphGetRootNodes(
    hGraph: CUgraph | SupportsInt | None,
    numRootNodes: int = 0,
) -> tuple[list[CUgraphNode], int]: ...
def cuGraphHostNodeGetParams(hNode: CUgraphNode | SupportsInt | None) -> CUDA_HOST_NODE_PARAMS: ...
def cuGraphHostNodeSetParams(
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUDA_HOST_NODE_PARAMS | None,
) -> None: ...
def cuGraphInstantiate(hGraph: CUgraph | SupportsInt | None, flags: int) -> CUgraphExec: ...
def cuGraphInstantiateWithParams(
    hGraph: CUgraph | SupportsInt | None,
    instantiateParams: CUDA_GRAPH_INSTANTIATE_PARAMS | None,
) -> CUgraphExec: ...
def cuGraphKernelNodeCopyAttributes(
    dst: CUgraphNode | SupportsInt | None,
    src: CUgraphNode | SupportsInt | None,
) -> None: ...
def cuGraphKernelNodeGetAttribute(
    hNode: CUgraphNode | SupportsInt | None,
    attr: CUkernelNodeAttrID,
) -> CUkernelNodeAttrValue: ...
def cuGraphKernelNodeGetParams(
    hNode: CUgraphNode | SupportsInt | None,
) -> CUDA_KERNEL_NODE_PARAMS: ...
def cuGraphKernelNodeSetAttribute(
    hNode: CUgraphNode | SupportsInt | None,
    attr: CUkernelNodeAttrID,
    value: CUkernelNodeAttrValue | None,
) -> None: ...
def cuGraphKernelNodeSetParams(
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUDA_KERNEL_NODE_PARAMS | None,
) -> None: ...
def cuGraphLaunch(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuGraphMemAllocNodeGetParams(
    hNode: CUgraphNode | SupportsInt | None,
) -> CUDA_MEM_ALLOC_NODE_PARAMS: ...
def cuGraphMemFreeNodeGetParams(hNode: CUgraphNode | SupportsInt | None) -> CUdeviceptr: ...
def cuGraphMemcpyNodeGetParams(hNode: CUgraphNode | SupportsInt | None) -> CUDA_MEMCPY3D: ...
def cuGraphMemcpyNodeSetParams(
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUDA_MEMCPY3D | None,
) -> None: ...
def cuGraphMemsetNodeGetParams(
    hNode: CUgraphNode | SupportsInt | None,
) -> CUDA_MEMSET_NODE_PARAMS: ...
def cuGraphMemsetNodeSetParams(
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUDA_MEMSET_NODE_PARAMS | None,
) -> None: ...
def cuGraphNodeFindInClone(
    hOriginalNode: CUgraphNode | SupportsInt | None,
    hClonedGraph: CUgraph | SupportsInt | None,
) -> CUgraphNode: ...
def cuGraphNodeGetContainingGraph(hNode: CUgraphNode | SupportsInt | None) -> CUgraph: ...
def cuGraphNodeGetDependencies(
    hNode: CUgraphNode | SupportsInt | None,
    numDependencies: int = 0,
) -> tuple[list[CUgraphNode], list[CUgraphEdgeData], int]: ...
def cuGraphNodeGetDependentNodes(
    hNode: CUgraphNode | SupportsInt | None,
    numDependentNodes: int = 0,
) -> tuple[list[CUgraphNode], list[CUgraphEdgeData], int]: ...
def cuGraphNodeGetEnabled(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hNode: CUgraphNode | SupportsInt | None,
) -> int: ...
def cuGraphNodeGetLocalId(hNode: CUgraphNode | SupportsInt | None) -> int: ...
def cuGraphNodeGetParams(hNode: CUgraphNode | SupportsInt | None) -> CUgraphNodeParams: ...
def cuGraphNodeGetToolsId(hNode: CUgraphNode | SupportsInt | None) -> int: ...
def cuGraphNodeGetType(hNode: CUgraphNode | SupportsInt | None) -> CUgraphNodeType: ...
def cuGraphNodeSetEnabled(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hNode: CUgraphNode | SupportsInt | None,
    isEnabled: int,
) -> None: ...
def cuGraphNodeSetParams(
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUgraphNodeParams | None,
) -> None: ...
def cuGraphNodeSetParams_v2(
    hNode: CUgraphNode | SupportsInt | None,
    nodeParams: CUgraphNodeParams | None,
) -> None: ...
def cuGraphReleaseUserObject(
    graph: CUgraph | SupportsInt | None,
    object: CUuserObject | SupportsInt | None,
    count: int,
) -> None: ...
def cuGraphRemoveDependencies(
    hGraph: CUgraph | SupportsInt | None,
    from_: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    to: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    edgeData: tuple[CUgraphEdgeData, ...] | list[CUgraphEdgeData] | None,
    numDependencies: int,
) -> None: ...
def cuGraphRetainUserObject(
    graph: CUgraph | SupportsInt | None,
    object: CUuserObject | SupportsInt | None,
    count: int,
    flags: int,
) -> None: ...
def cuGraphUpload(
    hGraphExec: CUgraphExec | SupportsInt | None,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuGraphicsEGLRegisterImage(
    image: EGLImageKHR | SupportsInt | None,
    flags: int,
) -> CUgraphicsResource: ...
def cuGraphicsGLRegisterBuffer(
    buffer: GLuint | SupportsInt | None,
    Flags: int,
) -> CUgraphicsResource: ...
def cuGraphicsGLRegisterImage(
    image: GLuint | SupportsInt | None,
    target: GLenum | SupportsInt | None,
    Flags: int,
) -> CUgraphicsResource: ...
def cuGraphicsMapResources(
    count: int,
    resources: CUgraphicsResource | SupportsInt | None,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuGraphicsResourceGetMappedEglFrame(
    resource: CUgraphicsResource | SupportsInt | None,
    index: int,
    mipLevel: int,
) -> CUeglFrame: ...
def cuGraphicsResourceGetMappedMipmappedArray(
    resource: CUgraphicsResource | SupportsInt | None,
) -> CUmipmappedArray: ...
def cuGraphicsResourceGetMappedPointer(
    resource: CUgraphicsResource | SupportsInt | None,
) -> tuple[CUdeviceptr, int]: ...
def cuGraphicsResourceSetMapFlags(
    resource: CUgraphicsResource | SupportsInt | None,
    flags: int,
) -> None: ...
def cuGraphicsSubResourceGetMappedArray(
    resource: CUgraphicsResource | SupportsInt | None,
    arrayIndex: int,
    mipLevel: int,
) -> CUarray: ...
def cuGraphicsUnmapResources(
    count: int,
    resources: CUgraphicsResource | SupportsInt | None,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuGraphicsUnregisterResource(resource: CUgraphicsResource | SupportsInt | None) -> None: ...
def cuGraphicsVDPAURegisterOutputSurface(
    vdpSurface: VdpOutputSurface | SupportsInt | None,
    flags: int,
) -> CUgraphicsResource: ...
def cuGraphicsVDPAURegisterVideoSurface(
    vdpSurface: VdpVideoSurface | SupportsInt | None,
    flags: int,
) -> CUgraphicsResource: ...
def cuGreenCtxCreate(
    desc: CUdevResourceDesc | SupportsInt | None,
    dev: CUdevice | SupportsInt | None,
    flags: int,
) -> CUgreenCtx: ...
def cuGreenCtxDestroy(hCtx: CUgreenCtx | SupportsInt | None) -> None: ...
def cuGreenCtxGetDevResource(
    hCtx: CUgreenCtx | SupportsInt | None,
    typename: CUdevResourceType,
) -> CUdevResource: ...
def cuGreenCtxGetId(greenCtx: CUgreenCtx | SupportsInt | None) -> int: ...
def cuGreenCtxRecordEvent(
    hCtx: CUgreenCtx | SupportsInt | None,
    hEvent: CUevent | SupportsInt | None,
) -> None: ...
def cuGreenCtxStreamCreate(
    greenCtx: CUgreenCtx | SupportsInt | None,
    flags: int,
    priority: int,
) -> CUstream: ...
def cuGreenCtxWaitEvent(
    hCtx: CUgreenCtx | SupportsInt | None,
    hEvent: CUevent | SupportsInt | None,
) -> None: ...
def cuImportExternalMemory(
    memHandleDesc: CUDA_EXTERNAL_MEMORY_HANDLE_DESC | None,
) -> CUexternalMemory: ...
def cuImportExternalSemaphore(
    semHandleDesc: CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC | None,
) -> CUexternalSemaphore: ...
def cuInit(Flags: int) -> None: ...
def cuIpcCloseMemHandle(dptr: CUdeviceptr | SupportsInt | None) -> None: ...
def cuIpcGetEventHandle(event: CUevent | SupportsInt | None) -> CUipcEventHandle: ...
def cuIpcGetMemHandle(dptr: CUdeviceptr | SupportsInt | None) -> CUipcMemHandle: ...
def cuIpcOpenEventHandle(handle: CUipcEventHandle) -> CUevent: ...
def cuIpcOpenMemHandle(handle: CUipcMemHandle, Flags: int) -> CUdeviceptr: ...
def cuKernelGetAttribute(
    attrib: CUfunction_attribute,
    kernel: CUkernel | SupportsInt | None,
    dev: CUdevice | SupportsInt | None,
) -> int: ...
def cuKernelGetFunction(kernel: CUkernel | SupportsInt | None) -> CUfunction: ...
def cuKernelGetLibrary(kernel: CUkernel | SupportsInt | None) -> CUlibrary: ...
def cuKernelGetName(hfunc: CUkernel | SupportsInt | None) -> bytes: ...
def cuKernelGetParamCount(kernel: CUkernel | SupportsInt | None) -> int: ...
def cuKernelGetParamInfo(
    kernel: CUkernel | SupportsInt | None,
    paramIndex: int,
) -> tuple[int, int]: ...
def cuKernelSetAttribute(
    attrib: CUfunction_attribute,
    val: int,
    kernel: CUkernel | SupportsInt | None,
    dev: CUdevice | SupportsInt | None,
) -> None: ...
def cuKernelSetCacheConfig(
    kernel: CUkernel | SupportsInt | None,
    config: CUfunc_cache,
    dev: CUdevice | SupportsInt | None,
) -> None: ...
def cuLaunch(f: CUfunction | SupportsInt | None) -> None: ...
def cuLaunchCooperativeKernel(
    f: CUfunction | SupportsInt | None,
    gridDimX: int,
    gridDimY: int,
    gridDimZ: int,
    blockDimX: int,
    blockDimY: int,
    blockDimZ: int,
    sharedMemBytes: int,
    hStream: CUstream | SupportsInt | None,
    kernelParams: Any,
) -> None: ...
def cuLaunchCooperativeKernelMultiDevice(
    launchParamsList: tuple[CUDA_LAUNCH_PARAMS, ...] | list[CUDA_LAUNCH_PARAMS] | None,
    numDevices: int,
    flags: int,
) -> None: ...
def cuLaunchGrid(f: CUfunction | SupportsInt | None, grid_width: int, grid_height: int) -> None: ...
def cuLaunchGridAsync(
    f: CUfunction | SupportsInt | None,
    grid_width: int,
    grid_height: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuLaunchHostFunc(hStream: Any, fn: Any, userData: Any) -> None: ...
def cuLaunchHostFunc_v2(
    hStream: CUstream | SupportsInt | None,
    fn: CUhostFn | SupportsInt | None,
    userData: Any,
    syncMode: int,
) -> NoReturn: ...
def cuLaunchKernel(
    f: CUfunction | SupportsInt | None,
    gridDimX: int,
    gridDimY: int,
    gridDimZ: int,
    blockDimX: int,
    blockDimY: int,
    blockDimZ: int,
    sharedMemBytes: int,
    hStream: CUstream | SupportsInt | None,
    kernelParams: Any,
    extra: int,
) -> None: ...
def cuLaunchKernelEx(
    config: CUlaunchConfig | None,
    f: CUfunction | SupportsInt | None,
    kernelParams: Any,
    extra: int,
) -> None: ...
def cuLibraryEnumerateKernels(
    numKernels: int,
    lib: CUlibrary | SupportsInt | None,
) -> list[CUkernel]: ...
def cuLibraryGetGlobal(
    library: CUlibrary | SupportsInt | None,
    name: bytes,
) -> tuple[CUdeviceptr, int]: ...
def cuLibraryGetKernel(library: CUlibrary | SupportsInt | None, name: bytes) -> CUkernel: ...
def cuLibraryGetKernelCount(lib: CUlibrary | SupportsInt | None) -> int: ...
def cuLibraryGetManaged(
    library: CUlibrary | SupportsInt | None,
    name: bytes,
) -> tuple[CUdeviceptr, int]: ...
def cuLibraryGetModule(library: CUlibrary | SupportsInt | None) -> CUmodule: ...
def cuLibraryGetUnifiedFunction(library: CUlibrary | SupportsInt | None, symbol: bytes) -> Any: ...
def cuLibraryLoadData(
    code: Any,
    jitOptions: tuple[CUjit_option, ...] | list[CUjit_option] | None,
    jitOptionsValues: tuple[Any, ...] | list[Any] | None,
    numJitOptions: int,
    libraryOptions: tuple[CUlibraryOption, ...] | list[CUlibraryOption] | None,
    libraryOptionValues: tuple[Any, ...] | list[Any] | None,
    numLibraryOptions: int,
) -> CUlibrary: ...
def cuLibraryLoadFromFile(
    fileName: bytes,
    jitOptions: tuple[CUjit_option, ...] | list[CUjit_option] | None,
    jitOptionsValues: tuple[Any, ...] | list[Any] | None,
    numJitOptions: int,
    libraryOptions: tuple[CUlibraryOption, ...] | list[CUlibraryOption] | None,
    libraryOptionValues: tuple[Any, ...] | list[Any] | None,
    numLibraryOptions: int,
) -> CUlibrary: ...
def cuLibraryUnload(library: CUlibrary | SupportsInt | None) -> None: ...
def cuLinkAddData(
    state: CUlinkState | SupportsInt | None,
    typename: CUjitInputType,
    data: Any,
    size: int,
    name: bytes,
    numOptions: int,
    options: tuple[CUjit_option, ...] | list[CUjit_option] | None,
    optionValues: tuple[Any, ...] | list[Any] | None,
) -> None: ...
def cuLinkAddFile(
    state: CUlinkState | SupportsInt | None,
    typename: CUjitInputType,
    path: bytes,
    numOptions: int,
    options: tuple[CUjit_option, ...] | list[CUjit_option] | None,
    optionValues: tuple[Any, ...] | list[Any] | None,
) -> None: ...
def cuLinkComplete(state: CUlinkState | SupportsInt | None) -> tuple[Any, int]: ...
def cuLinkCreate(
    numOptions: int,
    options: tuple[CUjit_option, ...] | list[CUjit_option] | None,
    optionValues: tuple[Any, ...] | list[Any] | None,
) -> CUlinkState: ...
def cuLinkDestroy(state: CUlinkState | SupportsInt | None) -> None: ...
def cuLogicalEndpointAddDevice(
    leId: CUlogicalEndpointId | SupportsInt | None,
    dev: CUdevice | SupportsInt | None,
) -> None: ...
def cuLogicalEndpointBindAddr(
    leId: CUlogicalEndpointId | SupportsInt | None,
    dev: CUdevice | SupportsInt | None,
    offset: Any,
    ptr: Any,
    size: Any,
    flags: int,
) -> None: ...
def cuLogicalEndpointBindMem(
    leId: CUlogicalEndpointId | SupportsInt | None,
    dev: CUdevice | SupportsInt | None,
    offset: Any,
    memHandle: CUmemGenericAllocationHandle | SupportsInt | None,
    memOffset: Any,
    size: Any,
    flags: int,
) -> None: ...
def cuLogicalEndpointCreate(
    leId: CUlogicalEndpointId | SupportsInt | None,
    prop: CUlogicalEndpointProp | None,
) -> None: ...
def cuLogicalEndpointDestroy(leId: CUlogicalEndpointId | SupportsInt | None) -> None: ...
def cuLogicalEndpointExport(
    leId: CUlogicalEndpointId | SupportsInt | None,
    handleType: CUlogicalEndpointIpcHandleType,
) -> Any: ...
def cuLogicalEndpointGetLimits(
    prop: CUlogicalEndpointProp | None,
) -> tuple[cuuint64_t, cuuint64_t]: ...
def cuLogicalEndpointIdRelease(
    baseLeId: CUlogicalEndpointId | SupportsInt | None,
    count: Any,
) -> None: ...
def cuLogicalEndpointIdReserve(count: Any) -> CUlogicalEndpointId: ...
def cuLogicalEndpointImport(
    leId: CUlogicalEndpointId | SupportsInt | None,
    handle: Any,
    handleType: CUlogicalEndpointIpcHandleType,
) -> None: ...
def cuLogicalEndpointQuery(leId: CUlogicalEndpointId | SupportsInt | None, count: Any) -> int: ...
def cuLogicalEndpointUnbind(
    leId: CUlogicalEndpointId | SupportsInt | None,
    dev: CUdevice | SupportsInt | None,
    offset: Any,
    size: Any,
) -> None: ...
def cuLogsCurrent(flags: int) -> CUlogIterator: ...
def cuLogsDumpToFile(
    iterator: CUlogIterator | SupportsInt | None,
    pathToFile: bytes,
    flags: int,
) -> CUlogIterator: ...
def cuLogsDumpToMemory(
    iterator: CUlogIterator | SupportsInt | None,
    buffer: bytes,
    size: int,
    flags: int,
) -> tuple[CUlogIterator, int]: ...
def cuLogsRegisterCallback(
    callbackFunc: CUlogsCallback | SupportsInt | None,
    userData: Any,
) -> CUlogsCallbackHandle: ...
def cuLogsUnregisterCallback(callback: CUlogsCallbackHandle | SupportsInt | None) -> None: ...
def cuMemAddressFree(ptr: CUdeviceptr | SupportsInt | None, size: int) -> None: ...
def cuMemAddressReserve(
    size: int,
    alignment: int,
    addr: CUdeviceptr | SupportsInt | None,
    flags: int,
) -> CUdeviceptr: ...
def cuMemAdvise(
    devPtr: CUdeviceptr | SupportsInt | None,
    count: int,
    advice: CUmem_advise,
    location: CUmemLocation,
) -> None: ...
def cuMemAlloc(bytesize: int) -> CUdeviceptr: ...
def cuMemAllocAsync(bytesize: int, hStream: CUstream | SupportsInt | None) -> CUdeviceptr: ...
def cuMemAllocFromPoolAsync(
    bytesize: int,
    pool: CUmemoryPool | SupportsInt | None,
    hStream: CUstream | SupportsInt | None,
) -> CUdeviceptr: ...
def cuMemAllocHost(bytesize: int) -> Any: ...
def cuMemAllocManaged(bytesize: int, flags: int) -> CUdeviceptr: ...
def cuMemAllocPitch(
    WidthInBytes: int,
    Height: int,
    ElementSizeBytes: int,
) -> tuple[CUdeviceptr, int]: ...
def cuMemBatchDecompressAsync(
    paramsArray: CUmemDecompressParams | None,
    count: int,
    flags: int,
    stream: CUstream | SupportsInt | None,
) -> int: ...
def cuMemCreate(
    size: int,
    prop: CUmemAllocationProp | None,
    flags: int,
) -> CUmemGenericAllocationHandle: ...
def cuMemDiscardAndPrefetchBatchAsync(
    dptrs: tuple[CUdeviceptr, ...] | list[CUdeviceptr] | None,
    sizes: tuple[int, ...] | list[int],
    count: int,
    prefetchLocs: tuple[CUmemLocation, ...] | list[CUmemLocation] | None,
    prefetchLocIdxs: tuple[int, ...] | list[int],
    numPrefetchLocs: int,
    flags: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemDiscardBatchAsync(
    dptrs: tuple[CUdeviceptr, ...] | list[CUdeviceptr] | None,
    sizes: tuple[int, ...] | list[int],
    count: int,
    flags: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemExportToShareableHandle(
    handle: CUmemGenericAllocationHandle | SupportsInt | None,
    handleType: CUmemAllocationHandleType,
    flags: int,
) -> Any: ...
def cuMemFree(dptr: CUdeviceptr | SupportsInt | None) -> None: ...
def cuMemFreeAsync(
    dptr: CUdeviceptr | SupportsInt | None,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemFreeHost(p: Any) -> None: ...
def cuMemGetAccess(
    location: CUmemLocation | None,
    ptr: CUdeviceptr | SupportsInt | None,
) -> int: ...
def cuMemGetAddressRange(dptr: CUdeviceptr | SupportsInt | None) -> tuple[CUdeviceptr, int]: ...
def cuMemGetAllocationGranularity(
    prop: CUmemAllocationProp | None,
    option: CUmemAllocationGranularity_flags,
) -> int: ...
def cuMemGetAllocationPropertiesFromHandle(
    handle: CUmemGenericAllocationHandle | SupportsInt | None,
) -> CUmemAllocationProp: ...
def cuMemGetDefaultMemPool(
    location: CUmemLocation | None,
    typename: CUmemAllocationType,
) -> CUmemoryPool: ...
def cuMemGetHandleForAddressRange(
    dptr: CUdeviceptr | SupportsInt | None,
    size: int,
    handleType: CUmemRangeHandleType,
    flags: int,
) -> Any: ...
def cuMemGetInfo() -> tuple[int, int]: ...
def cuMemGetLocationInfo(
    ptr: CUdeviceptr | SupportsInt | None,
    size: int,
    summaryGranularity: int,
    samplingGranularity: int,
    location_out: CUmemLocation | None,
) -> None: ...
def cuMemGetMemPool(
    location: CUmemLocation | None,
    typename: CUmemAllocationType,
) -> CUmemoryPool: ...
def cuMemHostAlloc(bytesize: int, Flags: int) -> Any: ...
def cuMemHostGetDevicePointer(p: Any, Flags: int) -> CUdeviceptr: ...
def cuMemHostGetFlags(p: Any) -> int: ...
def cuMemHostRegister(p: Any, bytesize: int, Flags: int) -> None: ...
def cuMemHostUnregister(p: Any) -> None: ...
def cuMemImportFromShareableHandle(
    osHandle: Any,
    shHandleType: CUmemAllocationHandleType,
) -> CUmemGenericAllocationHandle: ...
def cuMemMap(
    ptr: CUdeviceptr | SupportsInt | None,
    size: int,
    offset: int,
    handle: CUmemGenericAllocationHandle | SupportsInt | None,
    flags: int,
) -> None: ...
def cuMemMapArrayAsync(
    mapInfoList: tuple[CUarrayMapInfo, ...] | list[CUarrayMapInfo] | None,
    count: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemPoolCreate(poolProps: CUmemPoolProps | None) -> CUmemoryPool: ...
def cuMemPoolDestroy(pool: CUmemoryPool | SupportsInt | None) -> None: ...
def cuMemPoolExportPointer(ptr: CUdeviceptr | SupportsInt | None) -> CUmemPoolPtrExportData: ...
def cuMemPoolExportToShareableHandle(
    pool: CUmemoryPool | SupportsInt | None,
    handleType: CUmemAllocationHandleType,
    flags: int,
) -> Any: ...
def cuMemPoolGetAccess(
    memPool: CUmemoryPool | SupportsInt | None,
    location: CUmemLocation | None,
) -> CUmemAccess_flags: ...
def cuMemPoolGetAttribute(
    pool: CUmemoryPool | SupportsInt | None,
    attr: CUmemPool_attribute,
) -> Any: ...
def cuMemPoolImportFromShareableHandle(
    handle: Any,
    handleType: CUmemAllocationHandleType,
    flags: int,
) -> CUmemoryPool: ...
def cuMemPoolImportPointer(
    pool: CUmemoryPool | SupportsInt | None,
    shareData: CUmemPoolPtrExportData | None,
) -> CUdeviceptr: ...
def cuMemPoolSetAccess(
    pool: CUmemoryPool | SupportsInt | None,
    map: tuple[CUmemAccessDesc, ...] | list[CUmemAccessDesc] | None,
    count: int,
) -> None: ...
def cuMemPoolSetAttribute(
    pool: CUmemoryPool | SupportsInt | None,
    attr: CUmemPool_attribute,
    value: Any,
) -> None: ...
def cuMemPoolTrimTo(pool: CUmemoryPool | SupportsInt | None, minBytesToKeep: int) -> None: ...
def cuMemPrefetchAsync(
    devPtr: CUdeviceptr | SupportsInt | None,
    count: int,
    location: CUmemLocation,
    flags: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemPrefetchBatchAsync(
    dptrs: tuple[CUdeviceptr, ...] | list[CUdeviceptr] | None,
    sizes: tuple[int, ...] | list[int],
    count: int,
    prefetchLocs: tuple[CUmemLocation, ...] | list[CUmemLocation] | None,
    prefetchLocIdxs: tuple[int, ...] | list[int],
    numPrefetchLocs: int,
    flags: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemRangeGetAttribute(
    dataSize: int,
    attribute: CUmem_range_attribute,
    devPtr: CUdeviceptr | SupportsInt | None,
    count: int,
) -> Any: ...
def cuMemRangeGetAttributes(
    dataSizes: tuple[int, ...] | list[int],
    attributes: tuple[CUmem_range_attribute, ...] | list[CUmem_range_attribute] | None,
    numAttributes: int,
    devPtr: CUdeviceptr | SupportsInt | None,
    count: int,
) -> list[Any]: ...
def cuMemRelease(handle: CUmemGenericAllocationHandle | SupportsInt | None) -> None: ...
def cuMemRetainAllocationHandle(addr: Any) -> CUmemGenericAllocationHandle: ...
def cuMemSetAccess(
    ptr: CUdeviceptr | SupportsInt | None,
    size: int,
    desc: tuple[CUmemAccessDesc, ...] | list[CUmemAccessDesc] | None,
    count: int,
) -> None: ...
def cuMemSetMemPool(
    location: CUmemLocation | None,
    typename: CUmemAllocationType,
    pool: CUmemoryPool | SupportsInt | None,
) -> None: ...
def cuMemUnmap(ptr: CUdeviceptr | SupportsInt | None, size: int) -> None: ...
def cuMemcpy(
    dst: CUdeviceptr | SupportsInt | None,
    src: CUdeviceptr | SupportsInt | None,
    ByteCount: int,
) -> None: ...
def cuMemcpy2D(pCopy: CUDA_MEMCPY2D | None) -> None: ...
def cuMemcpy2DAsync(
    pCopy: CUDA_MEMCPY2D | None,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemcpy2DUnaligned(pCopy: CUDA_MEMCPY2D | None) -> None: ...
def cuMemcpy3D(pCopy: CUDA_MEMCPY3D | None) -> None: ...
def cuMemcpy3DAsync(
    pCopy: CUDA_MEMCPY3D | None,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemcpy3DBatchAsync(
    numOps: int,
    opList: tuple[CUDA_MEMCPY3D_BATCH_OP, ...] | list[CUDA_MEMCPY3D_BATCH_OP] | None,
    flags: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemcpy3DPeer(pCopy: CUDA_MEMCPY3D_PEER | None) -> None: ...
def cuMemcpy3DPeerAsync(
    pCopy: CUDA_MEMCPY3D_PEER | None,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemcpy3DWithAttributesAsync(
    op: CUDA_MEMCPY3D_BATCH_OP | None,
    flags: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemcpyAsync(
    dst: CUdeviceptr | SupportsInt | None,
    src: CUdeviceptr | SupportsInt | None,
    ByteCount: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemcpyAtoA(
    dstArray: CUarray | SupportsInt | None,
    dstOffset: int,
    srcArray: CUarray | SupportsInt | None,
    srcOffset: int,
    ByteCount: int,
) -> None: ...
def cuMemcpyAtoD(
    dstDevice: CUdeviceptr | SupportsInt | None,
    srcArray: CUarray | SupportsInt | None,
    srcOffset: int,
    ByteCount: int,
) -> None: ...
def cuMemcpyAtoH(
    dstHost: Any,
    srcArray: CUarray | SupportsInt | None,
    srcOffset: int,
    ByteCount: int,
) -> None: ...
def cuMemcpyAtoHAsync(
    dstHost: Any,
    srcArray: CUarray | SupportsInt | None,
    srcOffset: int,
    ByteCount: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemcpyBatchAsync(
    dsts: tuple[CUdeviceptr, ...] | list[CUdeviceptr] | None,
    srcs: tuple[CUdeviceptr, ...] | list[CUdeviceptr] | None,
    sizes: tuple[int, ...] | list[int],
    count: int,
    attrs: tuple[CUmemcpyAttributes, ...] | list[CUmemcpyAttributes] | None,
    attrsIdxs: tuple[int, ...] | list[int],
    numAttrs: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemcpyDtoA(
    dstArray: CUarray | SupportsInt | None,
    dstOffset: int,
    srcDevice: CUdeviceptr | SupportsInt | None,
    ByteCount: int,
) -> None: ...
def cuMemcpyDtoD(
    dstDevice: CUdeviceptr | SupportsInt | None,
    srcDevice: CUdeviceptr | SupportsInt | None,
    ByteCount: int,
) -> None: ...
def cuMemcpyDtoDAsync(
    dstDevice: CUdeviceptr | SupportsInt | None,
    srcDevice: CUdeviceptr | SupportsInt | None,
    ByteCount: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemcpyDtoH(
    dstHost: Any,
    srcDevice: CUdeviceptr | SupportsInt | None,
    ByteCount: int,
) -> None: ...
def cuMemcpyDtoHAsync(
    dstHost: Any,
    srcDevice: CUdeviceptr | SupportsInt | None,
    ByteCount: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemcpyHtoA(
    dstArray: CUarray | SupportsInt | None,
    dstOffset: int,
    srcHost: Any,
    ByteCount: int,
) -> None: ...
def cuMemcpyHtoAAsync(
    dstArray: CUarray | SupportsInt | None,
    dstOffset: int,
    srcHost: Any,
    ByteCount: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemcpyHtoD(
    dstDevice: CUdeviceptr | SupportsInt | None,
    srcHost: Any,
    ByteCount: int,
) -> None: ...
def cuMemcpyHtoDAsync(
    dstDevice: CUdeviceptr | SupportsInt | None,
    srcHost: Any,
    ByteCount: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemcpyPeer(
    dstDevice: CUdeviceptr | SupportsInt | None,
    dstContext: CUcontext | SupportsInt | None,
    srcDevice: CUdeviceptr | SupportsInt | None,
    srcContext: CUcontext | SupportsInt | None,
    ByteCount: int,
) -> None: ...
def cuMemcpyPeerAsync(
    dstDevice: CUdeviceptr | SupportsInt | None,
    dstContext: CUcontext | SupportsInt | None,
    srcDevice: CUdeviceptr | SupportsInt | None,
    srcContext: CUcontext | SupportsInt | None,
    ByteCount: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemcpyWithAttributesAsync(
    dst: CUdeviceptr | SupportsInt | None,
    src: CUdeviceptr | SupportsInt | None,
    size: int,
    attr: CUmemcpyAttributes | None,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemsetD16(dstDevice: CUdeviceptr | SupportsInt | None, us: int, N: int) -> None: ...
def cuMemsetD16Async(
    dstDevice: CUdeviceptr | SupportsInt | None,
    us: int,
    N: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemsetD2D16(
    dstDevice: CUdeviceptr | SupportsInt | None,
    dstPitch: int,
    us: int,
    Width: int,
    Height: int,
) -> None: ...
def cuMemsetD2D16Async(
    dstDevice: CUdeviceptr | SupportsInt | None,
    dstPitch: int,
    us: int,
    Width: int,
    Height: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemsetD2D32(
    dstDevice: CUdeviceptr | SupportsInt | None,
    dstPitch: int,
    ui: int,
    Width: int,
    Height: int,
) -> None: ...
def cuMemsetD2D32Async(
    dstDevice: CUdeviceptr | SupportsInt | None,
    dstPitch: int,
    ui: int,
    Width: int,
    Height: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemsetD2D8(
    dstDevice: CUdeviceptr | SupportsInt | None,
    dstPitch: int,
    uc: int,
    Width: int,
    Height: int,
) -> None: ...
def cuMemsetD2D8Async(
    dstDevice: CUdeviceptr | SupportsInt | None,
    dstPitch: int,
    uc: int,
    Width: int,
    Height: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemsetD32(dstDevice: CUdeviceptr | SupportsInt | None, ui: int, N: int) -> None: ...
def cuMemsetD32Async(
    dstDevice: CUdeviceptr | SupportsInt | None,
    ui: int,
    N: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMemsetD8(dstDevice: CUdeviceptr | SupportsInt | None, uc: int, N: int) -> None: ...
def cuMemsetD8Async(
    dstDevice: CUdeviceptr | SupportsInt | None,
    uc: int,
    N: int,
    hStream: CUstream | SupportsInt | None,
) -> None: ...
def cuMipmappedArrayCreate(
    pMipmappedArrayDesc: CUDA_ARRAY3D_DESCRIPTOR | None,
    numMipmapLevels: int,
) -> CUmipmappedArray: ...
def cuMipmappedArrayDestroy(hMipmappedArray: CUmipmappedArray | SupportsInt | None) -> None: ...
def cuMipmappedArrayGetLevel(
    hMipmappedArray: CUmipmappedArray | SupportsInt | None,
    level: int,
) -> CUarray: ...
def cuMipmappedArrayGetMemoryRequirements(
    mipmap: CUmipmappedArray | SupportsInt | None,
    device: CUdevice | SupportsInt | None,
) -> CUDA_ARRAY_MEMORY_REQUIREMENTS: ...
def cuMipmappedArrayGetSparseProperties(
    mipmap: CUmipmappedArray | SupportsInt | None,
) -> CUDA_ARRAY_SPARSE_PROPERTIES: ...
def cuModuleEnumerateFunctions(
    numFunctions: int,
    mod: CUmodule | SupportsInt | None,
) -> list[CUfunction]: ...
def cuModuleGetFunction(hmod: CUmodule | SupportsInt | None, name: bytes) -> CUfunction: ...
def cuModuleGetFunctionCount(mod: CUmodule | SupportsInt | None) -> int: ...
def cuModuleGetGlobal(
    hmod: CUmodule | SupportsInt | None,
    name: bytes,
) -> tuple[CUdeviceptr, int]: ...
def cuModuleGetLoadingMode() -> CUmoduleLoadingMode: ...
def cuModuleGetSurfRef(hmod: CUmodule | SupportsInt | None, name: bytes) -> CUsurfref: ...
def cuModuleGetTexRef(hmod: CUmodule | SupportsInt | None, name: bytes) -> CUtexref: ...
def cuModuleLoad(fname: bytes) -> CUmodule: ...
def cuModuleLoadData(image: Any) -> CUmodule: ...
def cuModuleLoadDataEx(
    image: Any,
    numOptions: int,
    options: tuple[CUjit_option, ...] | list[CUjit_option] | None,
    optionValues: tuple[Any, ...] | list[Any] | None,
) -> CUmodule: ...
def cuModuleLoadFatBinary(fatCubin: Any) -> CUmodule: ...
def cuModuleUnload(hmod: CUmodule | SupportsInt | None) -> None: ...
def cuMulticastAddDevice(
    mcHandle: CUmemGenericAllocationHandle | SupportsInt | None,
    dev: CUdevice | SupportsInt | None,
) -> None: ...
def cuMulticastBindAddr(
    mcHandle: CUmemGenericAllocationHandle | SupportsInt | None,
    mcOffset: int,
    memptr: CUdeviceptr | SupportsInt | None,
    size: int,
    flags: int,
) -> None: ...
def cuMulticastBindAddr_v2(
    mcHandle: CUmemGenericAllocationHandle | SupportsInt | None,
    dev: CUdevice | SupportsInt | None,
    mcOffset: int,
    memptr: CUdeviceptr | SupportsInt | None,
    size: int,
    flags: int,
) -> None: ...
def cuMulticastBindMem(
    mcHandle: CUmemGenericAllocationHandle | SupportsInt | None,
    mcOffset: int,
    memHandle: CUmemGenericAllocationHandle | SupportsInt | None,
    memOffset: int,
    size: int,
    flags: int,
) -> None: ...
def cuMulticastBindMem_v2(
    mcHandle: CUmemGenericAllocationHandle | SupportsInt | None,
    dev: CUdevice | SupportsInt | None,
    mcOffset: int,
    memHandle: CUmemGenericAllocationHandle | SupportsInt | None,
    memOffset: int,
    size: int,
    flags: int,
) -> None: ...
def cuMulticastCreate(prop: CUmulticastObjectProp | None) -> CUmemGenericAllocationHandle: ...
def cuMulticastGetGranularity(
    prop: CUmulticastObjectProp | None,
    option: CUmulticastGranularity_flags,
) -> int: ...
def cuMulticastUnbind(
    mcHandle: CUmemGenericAllocationHandle | SupportsInt | None,
    dev: CUdevice | SupportsInt | None,
    mcOffset: int,
    size: int,
) -> None: ...
def cuOccupancyAvailableDynamicSMemPerBlock(
    func: CUfunction | SupportsInt | None,
    numBlocks: int,
    blockSize: int,
) -> int: ...
def cuOccupancyMaxActiveBlocksPerMultiprocessor(
    func: CUfunction | SupportsInt | None,
    blockSize: int,
    dynamicSMemSize: int,
) -> int: ...
def cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    func: CUfunction | SupportsInt | None,
    blockSize: int,
    dynamicSMemSize: int,
    flags: int,
) -> int: ...
def cuOccupancyMaxActiveClusters(
    func: CUfunction | SupportsInt | None,
    config: CUlaunchConfig | None,
) -> int: ...
def cuOccupancyMaxPotentialBlockSize(
    func: CUfunction | SupportsInt | None,
    blockSizeToDynamicSMemSize: CUoccupancyB2DSize | SupportsInt | None,
    dynamicSMemSize: int,
    blockSizeLimit: int,
) -> tuple[int, int]: ...
def cuOccupancyMaxPotentialBlockSizeWithFlags(
    func: CUfunction | SupportsInt | None,
    blockSizeToDynamicSMemSize: CUoccupancyB2DSize | SupportsInt | None,
    dynamicSMemSize: int,
    blockSizeLimit: int,
    flags: int,
) -> tuple[int, int]: ...
def cuOccupancyMaxPotentialClusterSize(
    func: CUfunction | SupportsInt | None,
    config: CUlaunchConfig | None,
) -> int: ...
def cuParamSetSize(hfunc: CUfunction | SupportsInt | None, numbytes: int) -> None: ...
def cuParamSetTexRef(
    hfunc: CUfunction | SupportsInt | None,
    texunit: int,
    hTexRef: CUtexref | SupportsInt | None,
) -> None: ...
def cuParamSetf(hfunc: CUfunction | SupportsInt | None, offset: int, value: float) -> None: ...
def cuParamSeti(hfunc: CUfunction | SupportsInt | None, offset: int, value: int) -> None: ...
def cuParamSetv(
    hfunc: CUfunction | SupportsInt | None,
    offset: int,
    ptr: Any,
    numbytes: int,
) -> None: ...
def cuPointerGetAttribute(
    attribute: CUpointer_attribute,
    ptr: CUdeviceptr | SupportsInt | None,
) -> Any: ...
def cuPointerGetAttributes(
    numAttributes: int,
    attributes: tuple[CUpointer_attribute, ...] | list[CUpointer_attribute] | None,
    ptr: CUdeviceptr | SupportsInt | None,
) -> list[Any]: ...
def cuPointerSetAttribute(
    value: Any,
    attribute: CUpointer_attribute,
    ptr: CUdeviceptr | SupportsInt | None,
) -> None: ...
def cuProfilerStart() -> None: ...
def cuProfilerStop() -> None: ...
def cuSignalExternalSemaphoresAsync(
    extSemArray: tuple[CUexternalSemaphore, ...] | list[CUexternalSemaphore] | None,
    paramsArray: tuple[CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS, ...] | list[CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS] | None,
    numExtSems: int,
    stream: CUstream | SupportsInt | None,
) -> None: ...
def cuStreamAddCallback(
    hStream: CUstream | SupportsInt | None,
    callback: CUstreamCallback | SupportsInt | None,
    userData: Any,
    flags: int,
) -> None: ...
def cuStreamAttachMemAsync(
    hStream: CUstream | SupportsInt | None,
    dptr: CUdeviceptr | SupportsInt | None,
    length: int,
    flags: int,
) -> None: ...
def cuStreamBatchMemOp(
    stream: CUstream | SupportsInt | None,
    count: int,
    paramArray: tuple[CUstreamBatchMemOpParams, ...] | list[CUstreamBatchMemOpParams] | None,
    flags: int,
) -> None: ...
def cuStreamBeginCapture(
    hStream: CUstream | SupportsInt | None,
    mode: CUstreamCaptureMode,
) -> None: ...
def cuStreamBeginCaptureToCig(
    hStream: CUstream | SupportsInt | None,
    streamCigCaptureParams: CUstreamCigCaptureParams | None,
) -> None: ...
def cuStreamBeginCaptureToGraph(
    hStream: CUstream | SupportsInt | None,
    hGraph: CUgraph | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    dependencyData: tuple[CUgraphEdgeData, ...] | list[CUgraphEdgeData] | None,
    numDependencies: int,
    mode: CUstreamCaptureMode,
) -> None: ...
def cuStreamBeginRecaptureToGraph(
    hStream: CUstream | SupportsInt | None,
    mode: CUstreamCaptureMode,
    hGraph: CUgraph | SupportsInt | None,
    callbackFunc: CUgraphRecaptureCallback | SupportsInt | None,
    userData: Any,
) -> None: ...
def cuStreamCopyAttributes(
    dst: CUstream | SupportsInt | None,
    src: CUstream | SupportsInt | None,
) -> None: ...
def cuStreamCreate(Flags: int) -> CUstream: ...
def cuStreamCreateWithPriority(flags: int, priority: int) -> CUstream: ...
def cuStreamDestroy(hStream: CUstream | SupportsInt | None) -> None: ...
def cuStreamEndCapture(hStream: CUstream | SupportsInt | None) -> CUgraph: ...
def cuStreamEndCaptureToCig(hStream: CUstream | SupportsInt | None) -> None: ...
def cuStreamGetAttribute(
    hStream: CUstream | SupportsInt | None,
    attr: CUstreamAttrID,
) -> CUstreamAttrValue: ...
def cuStreamGetCaptureInfo(
    hStream: CUstream | SupportsInt | None,
) -> tuple[
    CUstreamCaptureStatus,
    cuuint64_t,
    CUgraph,
    list[CUgraphNode],
    list[CUgraphEdgeData],
    int,
]: ...
def cuStreamGetCtx(hStream: CUstream | SupportsInt | None) -> CUcontext: ...
def cuStreamGetCtx_v2(hStream: CUstream | SupportsInt | None) -> tuple[CUcontext, CUgreenCtx]: ...
def cuStreamGetDevResource(
    hStream: CUstream | SupportsInt | None,
    typename: CUdevResourceType,
) -> CUdevResource: ...
def cuStreamGetDevice(hStream: CUstream | SupportsInt | None) -> CUdevice: ...
def cuStreamGetFlags(hStream: CUstream | SupportsInt | None) -> int: ...
def cuStreamGetGreenCtx(hStream: CUstream | SupportsInt | None) -> CUgreenCtx: ...
def cuStreamGetId(hStream: CUstream | SupportsInt | None) -> int: ...
def cuStreamGetPriority(hStream: CUstream | SupportsInt | None) -> int: ...
def cuStreamIsCapturing(hStream: CUstream | SupportsInt | None) -> CUstreamCaptureStatus: ...
def cuStreamQuery(hStream: CUstream | SupportsInt | None) -> None: ...
def cuStreamSetAttribute(
    hStream: CUstream | SupportsInt | None,
    attr: CUstreamAttrID,
    value: CUstreamAttrValue | None,
) -> None: ...
def cuStreamSynchronize(hStream: CUstream | SupportsInt | None) -> None: ...
def cuStreamUpdateCaptureDependencies(
    hStream: CUstream | SupportsInt | None,
    dependencies: tuple[CUgraphNode, ...] | list[CUgraphNode] | None,
    dependencyData: tuple[CUgraphEdgeData, ...] | list[CUgraphEdgeData] | None,
    numDependencies: int,
    flags: int,
) -> None: ...
def cuStreamWaitEvent(
    hStream: CUstream | SupportsInt | None,
    hEvent: CUevent | SupportsInt | None,
    Flags: int,
) -> None: ...
def cuStreamWaitValue32(
    stream: CUstream | SupportsInt | None,
    addr: CUdeviceptr | SupportsInt | None,
    value: Any,
    flags: int,
) -> None: ...
def cuStreamWaitValue64(
    stream: CUstream | SupportsInt | None,
    addr: CUdeviceptr | SupportsInt | None,
    value: Any,
    flags: int,
) -> None: ...
def cuStreamWriteValue32(
    stream: CUstream | SupportsInt | None,
    addr: CUdeviceptr | SupportsInt | None,
    value: Any,
    flags: int,
) -> None: ...
def cuStreamWriteValue64(
    stream: CUstream | SupportsInt | None,
    addr: CUdeviceptr | SupportsInt | None,
    value: Any,
    flags: int,
) -> None: ...
def cuSurfObjectCreate(pResDesc: CUDA_RESOURCE_DESC | None) -> CUsurfObject: ...
def cuSurfObjectDestroy(surfObject: CUsurfObject | SupportsInt | None) -> None: ...
def cuSurfObjectGetResourceDesc(
    surfObject: CUsurfObject | SupportsInt | None,
) -> CUDA_RESOURCE_DESC: ...
def cuSurfRefGetArray(hSurfRef: CUsurfref | SupportsInt | None) -> CUarray: ...
def cuSurfRefSetArray(
    hSurfRef: CUsurfref | SupportsInt | None,
    hArray: CUarray | SupportsInt | None,
    Flags: int,
) -> None: ...
def cuTensorMapEncodeIm2col(
    tensorDataType: CUtensorMapDataType,
    tensorRank: Any,
    globalAddress: Any,
    globalDim: tuple[cuuint64_t, ...] | list[cuuint64_t] | None,
    globalStrides: tuple[cuuint64_t, ...] | list[cuuint64_t] | None,
    pixelBoxLowerCorner: tuple[int, ...] | list[int] | None,
    pixelBoxUpperCorner: tuple[int, ...] | list[int] | None,
    channelsPerPixel: Any,
    pixelsPerColumn: Any,
    elementStrides: tuple[cuuint32_t, ...] | list[cuuint32_t] | None,
    interleave: CUtensorMapInterleave,
    swizzle: CUtensorMapSwizzle,
    l2Promotion: CUtensorMapL2promotion,
    oobFill: CUtensorMapFloatOOBfill,
) -> CUtensorMap: ...
def cuTensorMapEncodeIm2colWide(
    tensorDataType: CUtensorMapDataType,
    tensorRank: Any,
    globalAddress: Any,
    globalDim: tuple[cuuint64_t, ...] | list[cuuint64_t] | None,
    globalStrides: tuple[cuuint64_t, ...] | list[cuuint64_t] | None,
    pixelBoxLowerCornerWidth: int,
    pixelBoxUpperCornerWidth: int,
    channelsPerPixel: Any,
    pixelsPerColumn: Any,
    elementStrides: tuple[cuuint32_t, ...] | list[cuuint32_t] | None,
    interleave: CUtensorMapInterleave,
    mode: CUtensorMapIm2ColWideMode,
    swizzle: CUtensorMapSwizzle,
    l2Promotion: CUtensorMapL2promotion,
    oobFill: CUtensorMapFloatOOBfill,
) -> CUtensorMap: ...
def cuTensorMapEncodeTiled(
    tensorDataType: CUtensorMapDataType,
    tensorRank: Any,
    globalAddress: Any,
    globalDim: tuple[cuuint64_t, ...] | list[cuuint64_t] | None,
    globalStrides: tuple[cuuint64_t, ...] | list[cuuint64_t] | None,
    boxDim: tuple[cuuint32_t, ...] | list[cuuint32_t] | None,
    elementStrides: tuple[cuuint32_t, ...] | list[cuuint32_t] | None,
    interleave: CUtensorMapInterleave,
    swizzle: CUtensorMapSwizzle,
    l2Promotion: CUtensorMapL2promotion,
    oobFill: CUtensorMapFloatOOBfill,
) -> CUtensorMap: ...
def cuTensorMapReplaceAddress(tensorMap: CUtensorMap | None, globalAddress: Any) -> None: ...
def cuTensorMapSetAllocationClass(
    tensorMap: CUtensorMap | None,
    allocClass: CUtensorMapAllocClass,
) -> CUtensorMapAllocClass: ...
def cuTexObjectCreate(
    pResDesc: CUDA_RESOURCE_DESC | None,
    pTexDesc: CUDA_TEXTURE_DESC | None,
    pResViewDesc: CUDA_RESOURCE_VIEW_DESC | None,
) -> CUtexObject: ...
def cuTexObjectDestroy(texObject: CUtexObject | SupportsInt | None) -> None: ...
def cuTexObjectGetResourceDesc(
    texObject: CUtexObject | SupportsInt | None,
) -> CUDA_RESOURCE_DESC: ...
def cuTexObjectGetResourceViewDesc(
    texObject: CUtexObject | SupportsInt | None,
) -> CUDA_RESOURCE_VIEW_DESC: ...
def cuTexObjectGetTextureDesc(texObject: CUtexObject | SupportsInt | None) -> CUDA_TEXTURE_DESC: ...
def cuTexRefCreate() -> CUtexref: ...
def cuTexRefDestroy(hTexRef: CUtexref | SupportsInt | None) -> None: ...
def cuTexRefGetAddress(hTexRef: CUtexref | SupportsInt | None) -> CUdeviceptr: ...
def cuTexRefGetAddressMode(hTexRef: CUtexref | SupportsInt | None, dim: int) -> CUaddress_mode: ...
def cuTexRefGetArray(hTexRef: CUtexref | SupportsInt | None) -> CUarray: ...
def cuTexRefGetBorderColor(hTexRef: Any) -> list[float]: ...
def cuTexRefGetFilterMode(hTexRef: CUtexref | SupportsInt | None) -> CUfilter_mode: ...
def cuTexRefGetFlags(hTexRef: CUtexref | SupportsInt | None) -> int: ...
def cuTexRefGetFormat(hTexRef: CUtexref | SupportsInt | None) -> tuple[CUarray_format, int]: ...
def cuTexRefGetMaxAnisotropy(hTexRef: CUtexref | SupportsInt | None) -> int: ...
def cuTexRefGetMipmapFilterMode(hTexRef: CUtexref | SupportsInt | None) -> CUfilter_mode: ...
def cuTexRefGetMipmapLevelBias(hTexRef: CUtexref | SupportsInt | None) -> float: ...
def cuTexRefGetMipmapLevelClamp(hTexRef: CUtexref | SupportsInt | None) -> tuple[float, float]: ...
def cuTexRefGetMipmappedArray(hTexRef: CUtexref | SupportsInt | None) -> CUmipmappedArray: ...
def cuTexRefSetAddress(
    hTexRef: CUtexref | SupportsInt | None,
    dptr: CUdeviceptr | SupportsInt | None,
    numbytes: int,
) -> int: ...
def cuTexRefSetAddress2D(
    hTexRef: CUtexref | SupportsInt | None,
    desc: CUDA_ARRAY_DESCRIPTOR | None,
    dptr: CUdeviceptr | SupportsInt | None,
    Pitch: int,
) -> None: ...
def cuTexRefSetAddressMode(
    hTexRef: CUtexref | SupportsInt | None,
    dim: int,
    am: CUaddress_mode,
) -> None: ...
def cuTexRefSetArray(
    hTexRef: CUtexref | SupportsInt | None,
    hArray: CUarray | SupportsInt | None,
    Flags: int,
) -> None: ...
def cuTexRefSetBorderColor(hTexRef: CUtexref | SupportsInt | None, pBorderColor: float) -> None: ...
def cuTexRefSetFilterMode(hTexRef: CUtexref | SupportsInt | None, fm: CUfilter_mode) -> None: ...
def cuTexRefSetFlags(hTexRef: CUtexref | SupportsInt | None, Flags: int) -> None: ...
def cuTexRefSetFormat(
    hTexRef: CUtexref | SupportsInt | None,
    fmt: CUarray_format,
    NumPackedComponents: int,
) -> None: ...
def cuTexRefSetMaxAnisotropy(hTexRef: CUtexref | SupportsInt | None, maxAniso: int) -> None: ...
def cuTexRefSetMipmapFilterMode(
    hTexRef: CUtexref | SupportsInt | None,
    fm: CUfilter_mode,
) -> None: ...
def cuTexRefSetMipmapLevelBias(hTexRef: CUtexref | SupportsInt | None, bias: float) -> None: ...
def cuTexRefSetMipmapLevelClamp(
    hTexRef: CUtexref | SupportsInt | None,
    minMipmapLevelClamp: float,
    maxMipmapLevelClamp: float,
) -> None: ...
def cuTexRefSetMipmappedArray(
    hTexRef: CUtexref | SupportsInt | None,
    hMipmappedArray: CUmipmappedArray | SupportsInt | None,
    Flags: int,
) -> None: ...
def cuThreadExchangeStreamCaptureMode(mode: CUstreamCaptureMode) -> CUstreamCaptureMode: ...
def cuUserObjectCreate(
    ptr: Any,
    destroy: CUhostFn | SupportsInt | None,
    initialRefcount: int,
    flags: int,
) -> CUuserObject: ...
def cuUserObjectRelease(object: CUuserObject | SupportsInt | None, count: int) -> None: ...
def cuUserObjectRetain(object: CUuserObject | SupportsInt | None, count: int) -> None: ...
def cuVDPAUCtxCreate(
    flags: int,
    device: CUdevice | SupportsInt | None,
    vdpDevice: VdpDevice | SupportsInt | None,
    vdpGetProcAddress: VdpGetProcAddress | SupportsInt | None,
) -> CUcontext: ...
def cuVDPAUGetDevice(
    vdpDevice: VdpDevice | SupportsInt | None,
    vdpGetProcAddress: VdpGetProcAddress | SupportsInt | None,
) -> CUdevice: ...
def cuWaitExternalSemaphoresAsync(
    extSemArray: tuple[CUexternalSemaphore, ...] | list[CUexternalSemaphore] | None,
    paramsArray: tuple[CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, ...] | list[CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS] | None,
    numExtSems: int,
    stream: CUstream | SupportsInt | None,
) -> None: ...
def sizeof(objType: Any) -> int: ...
