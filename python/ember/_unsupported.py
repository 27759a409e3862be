"""PyTorch's names for what ember does not have, each raising
NotImplementedError that names itself and its family (issue 40, item 3):
complex numbers, sparse tensors, quantized tensors, named tensors, nested
tensors, vendor kernels (cuDNN, MIOpen, oneDNN, FBGEMM and PyTorch's
CUDA-only batch-norm pieces) and TorchScript's and the dispatcher's
internals.

Functions raise when called, classes when constructed (isinstance checks
against them are simply False), and values (ember.complex64,
ember.per_tensor_affine) raise when a factory is handed one. Each carries
`_unsupported` (its reason), so tools/api_coverage.py counts them apart
from the names that work.
"""

__all__ = ["install", "FAMILIES"]

# family -> (why, {namespace: names}); a name is a value (a dtype or a
# constant) when listed under "values", else a function or a class.
FAMILIES = {
    "complex numbers": ("ember has no complex dtypes", {
        "ember": "ComplexDoubleStorage ComplexFloatStorage complex polar view_as_complex view_as_complex_copy view_as_real view_as_real_copy stft istft",
        "values": "cdouble cfloat chalf complex128 complex32 complex64",
        "Tensor": "cdouble cfloat chalf stft istft",
        "linalg": "eig eigvals",
    }),
    "sparse tensors": ("ember's tensors are all strided (dense)", {
        "ember": "sparse_coo_tensor sparse_csr_tensor sparse_csc_tensor sparse_bsr_tensor sparse_bsc_tensor "
                 "sparse_compressed_tensor smm spmm dsmm hsmm hspmm saddmm sspaddmm native_norm resize_as_sparse_ "
                 "indices_copy values_copy crow_indices_copy col_indices_copy ccol_indices_copy row_indices_copy",
        "Tensor": "coalesce is_coalesced indices values crow_indices col_indices ccol_indices row_indices "
                  "sparse_mask sparse_resize_ sparse_resize_and_clear_ smm sspaddmm to_sparse to_sparse_coo "
                  "to_sparse_csr to_sparse_csc to_sparse_bsr to_sparse_bsc resize_as_sparse_",
    }),
    "quantized tensors": ("ember has no quantized dtypes", {
        "ember": "QInt32Storage QInt8Storage QUInt2x4Storage QUInt4x2Storage QUInt8Storage qscheme "
                 "choose_qparams_optimized dequantize empty_quantized fused_moving_avg_obs_fake_quant "
                 "int_repr q_per_channel_axis q_per_channel_scales q_per_channel_zero_points q_scale q_zero_point "
                 "quantize_per_channel quantize_per_tensor quantize_per_tensor_dynamic quantized_batch_norm "
                 "quantized_gru quantized_gru_cell quantized_lstm quantized_lstm_cell quantized_max_pool1d "
                 "quantized_max_pool2d quantized_rnn_relu_cell quantized_rnn_tanh_cell",
        "values": "qint32 qint8 quint2x4 quint4x2 quint8 per_channel_affine per_channel_affine_float_qparams "
                  "per_channel_symmetric per_tensor_affine per_tensor_symmetric",
        "Tensor": "dequantize int_repr q_per_channel_axis q_per_channel_scales q_per_channel_zero_points q_scale "
                  "q_zero_point qscheme",
    }),
    "named tensors": ("ember's dims have no names", {
        "ember": "align_tensors",
        "Tensor": "align_as align_to refine_names rename rename_",
    }),
    "nested tensors": ("ember has no nested tensors", {
        "Tensor": "to_padded_tensor",
    }),
    "vendor kernels": ("ember runs its own kernels, not cuDNN's, MIOpen's, oneDNN's or FBGEMM's (PyTorch's "
                       "batch_norm_stats family is CUDA-only, and raises on the CPU too)", {
        "ember": "cudnn_affine_grid_generator cudnn_batch_norm cudnn_convolution cudnn_convolution_add_relu "
                 "cudnn_convolution_relu cudnn_convolution_transpose cudnn_grid_sampler miopen_batch_norm "
                 "miopen_convolution miopen_convolution_add_relu miopen_convolution_relu "
                 "miopen_convolution_transpose miopen_depthwise_convolution miopen_rnn mkldnn_adaptive_avg_pool2d "
                 "mkldnn_convolution mkldnn_linear_backward_weights mkldnn_max_pool2d mkldnn_max_pool3d "
                 "fbgemm_linear_fp16_weight fbgemm_linear_fp16_weight_fp32_activation fbgemm_linear_int8_weight "
                 "fbgemm_linear_int8_weight_fp32_activation fbgemm_linear_quantize_weight "
                 "fbgemm_pack_gemm_matrix_fp16 fbgemm_pack_quantized_matrix batch_norm_backward_elemt "
                 "batch_norm_backward_reduce batch_norm_elemt batch_norm_gather_stats "
                 "batch_norm_gather_stats_with_counts batch_norm_stats batch_norm_update_stats",
        "Tensor": "to_mkldnn",
    }),
    "TorchScript and dispatcher internals": ("ember has no TorchScript IR or dispatcher (ember.jit runs scripted "
                                             "code eagerly; the compiler is ember.compile)", {
        "ember": "AggregationType AliasDb AnyType Argument ArgumentSpec BenchmarkConfig BenchmarkExecutionStats "
                 "Block BoolType BufferDict CallStack Capsule ClassType Code CompilationUnit CompleteArgumentSpec "
                 "ComplexType ConcreteModuleType ConcreteModuleTypeBuilder DeepCopyMemoTable "
                 "DeserializationStorageContext DeviceObjType DictType DispatchKey DispatchKeySet EnumType "
                 "ErrorReport ExcludeDispatchKeyGuard ExecutionPlan FatalError FileCheck FloatType FunctionSchema "
                 "FutureType Gradient Graph GraphExecutorState IODescriptor InferredType IntType InterfaceType "
                 "JITException ListType LiteScriptModule LockingLogger LoggerBase MobileOptimizerType ModuleDict "
                 "Node NoneType NoopLogger NumberType OperatorInfo OptionalType ParameterDict PyObjectType "
                 "PyTorchFileReader PyTorchFileWriter RRefType ScriptClass ScriptClassFunction ScriptDict "
                 "ScriptDictIterator ScriptDictKeyIterator ScriptFunction ScriptList ScriptListIterator "
                 "ScriptMethod ScriptModule ScriptModuleSerializer ScriptObject ScriptObjectProperty "
                 "SerializationStorageContext StaticModule Stream StreamObjType StringType SymFloatNode SymIntNode "
                 "SymIntType Tag TensorType ThroughputBenchmark TracingState TupleType Type UnionType Use Value "
                 "import_ir_module import_ir_module_from_buffer merge_type_from_type_comment parse_ir "
                 "parse_schema parse_type_comment unify_type_list",
        "values": "AVG SUM CONV_BN_FUSION FUSE_ADD_RELU HOIST_CONV_PACKED_PARAMS INSERT_FOLD_PREPACK_OPS "
                  "REMOVE_DROPOUT",
    }),
}


def _message(where, name, family, why):
    return f"{where}{name}: {family} are not implemented in ember ({why})"


class _UnsupportedValue:
    """A dtype or constant ember names but lacks: comparisons work (it
    equals only itself), using it raises."""

    def __init__(self, name, reason):
        self._name, self._unsupported = name, reason

    def __repr__(self):
        return f"ember.{self._name}"

    is_floating_point = False
    is_complex = property(lambda self: self._name.startswith("c"))
    is_signed = False

    def __reduce__(self):
        raise NotImplementedError(self._unsupported)


def _function(where, name, reason):
    def fn(*args, **kwargs):
        raise NotImplementedError(reason)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = reason
    fn._unsupported = reason
    return fn


def _class(name, reason):
    def __new__(cls, *args, **kwargs):
        raise NotImplementedError(reason)
    return type(name, (), {"__new__": __new__, "__doc__": reason, "_unsupported": reason, "__module__": "ember"})


def install(ember_module, tensor_class, linalg_module):
    """Puts every family's names where PyTorch has them, unless ember has
    the name already."""
    targets = {"ember": ember_module, "values": ember_module, "Tensor": tensor_class, "linalg": linalg_module}
    prefixes = {"ember": "ember.", "values": "ember.", "Tensor": "Tensor.", "linalg": "ember.linalg."}
    for family, (why, spaces) in FAMILIES.items():
        for space, names in spaces.items():
            target = targets[space]
            for name in names.split():
                if hasattr(target, name):
                    continue
                reason = _message(prefixes[space], name, family, why)
                if space == "values":
                    value = _UnsupportedValue(name, reason)
                elif name[0].isupper():
                    value = _class(name, reason)
                else:
                    value = _function(prefixes[space], name, reason)
                setattr(target, name, value)
