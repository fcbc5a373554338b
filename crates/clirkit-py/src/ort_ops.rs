//! onnxruntime custom operators, registered through the C entry point `RegisterCustomOps` that
//! `SessionOptions.register_custom_ops_library` looks up in this library (so the wheel's one shared
//! object serves Python and onnxruntime alike). The operators live in the `ai.clirkit` domain:
//!
//! - `SkipLayerNormalization`: onnxruntime's `com.microsoft` operator of that name (inputs `input`,
//!   `skip`, `gamma`, optional `beta` and `bias`; outputs `output` and the optional residual sum at
//!   index 3; attribute `epsilon`), computed by `clirkit_core::encode::layer_norm` with the same
//!   float operations in the same order, several rows at a time.
//! - `MultiHeadAttention`: onnxruntime's `com.microsoft` operator of that name for self-attention
//!   without mask, bias or past state (inputs `query`, `key`, `value` of shape `batch × tokens ×
//!   heads·size`; attributes `num_heads` and `scale`), computed by
//!   `clirkit_core::encode::float_attention` with the float operations onnxruntime performs off its
//!   flash path.
//!
//! Only onnxruntime's C ABI is used: the `OrtApi` function table (entries at their fixed positions,
//! which onnxruntime never reorders) and the `OrtCustomOp` structure of API version 16.

use clirkit_core::encode::float_attention::MultiHeadAttention;
use clirkit_core::encode::layer_norm::SkipLayerNorm;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// The `OrtApi` and `OrtCustomOp` version used (onnxruntime 1.16 and later).
const API_VERSION: u32 = 16;
const DOMAIN: &CStr = c"ai.clirkit";
const SKIP_LAYER_NORM: &CStr = c"SkipLayerNormalization";
const ATTENTION: &CStr = c"MultiHeadAttention";
const ELEMENT_FLOAT: c_int = 1;
const ORT_INVALID_ARGUMENT: c_int = 2;
const REQUIRED: c_int = 0;
const OPTIONAL: c_int = 1;

type Status = *mut c_void;
type Api = *const *const c_void;

#[repr(C)]
pub struct OrtApiBase {
    get_api: unsafe extern "C" fn(u32) -> Api,
    _get_version_string: unsafe extern "C" fn() -> *const c_char,
}

/// `OrtCustomOp` up to its version-16 fields (onnxruntime reads no field past those of the version
/// an operator declares); the later ones are left empty.
#[repr(C)]
struct CustomOp {
    version: u32,
    create_kernel: Option<unsafe extern "C" fn(*const CustomOp, Api, *const c_void) -> *mut c_void>,
    get_name: unsafe extern "C" fn(*const CustomOp) -> *const c_char,
    get_execution_provider_type: unsafe extern "C" fn(*const CustomOp) -> *const c_char,
    get_input_type: unsafe extern "C" fn(*const CustomOp, usize) -> c_int,
    get_input_type_count: unsafe extern "C" fn(*const CustomOp) -> usize,
    get_output_type: unsafe extern "C" fn(*const CustomOp, usize) -> c_int,
    get_output_type_count: unsafe extern "C" fn(*const CustomOp) -> usize,
    kernel_compute: Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>,
    kernel_destroy: unsafe extern "C" fn(*mut c_void),
    get_input_characteristic: unsafe extern "C" fn(*const CustomOp, usize) -> c_int,
    get_output_characteristic: unsafe extern "C" fn(*const CustomOp, usize) -> c_int,
    get_input_memory_type: unsafe extern "C" fn(*const CustomOp, usize) -> c_int,
    get_variadic_input_min_arity: unsafe extern "C" fn(*const CustomOp) -> c_int,
    get_variadic_input_homogeneity: unsafe extern "C" fn(*const CustomOp) -> c_int,
    get_variadic_output_min_arity: unsafe extern "C" fn(*const CustomOp) -> c_int,
    get_variadic_output_homogeneity: unsafe extern "C" fn(*const CustomOp) -> c_int,
    create_kernel_v2:
        unsafe extern "C" fn(*const CustomOp, Api, *const c_void, *mut *mut c_void) -> Status,
    kernel_compute_v2: unsafe extern "C" fn(*mut c_void, *mut c_void) -> Status,
    later_fields: [Option<unsafe extern "C" fn()>; 7],
}

type Name = unsafe extern "C" fn(*const CustomOp) -> *const c_char;
type Count = unsafe extern "C" fn(*const CustomOp) -> usize;
type Characteristic = unsafe extern "C" fn(*const CustomOp, usize) -> c_int;
type Compute = unsafe extern "C" fn(*mut c_void, *mut c_void) -> Status;

/// A CPU operator of float inputs and outputs, computed by `compute`.
const fn operator(
    name: Name,
    (inputs, outputs): (Count, Count),
    (input, output): (Characteristic, Characteristic),
    compute: Compute,
) -> CustomOp {
    CustomOp {
        version: API_VERSION,
        create_kernel: None,
        get_name: name,
        get_execution_provider_type: cpu_provider,
        get_input_type: float_type,
        get_input_type_count: inputs,
        get_output_type: float_type,
        get_output_type_count: outputs,
        kernel_compute: None,
        kernel_destroy: destroy_kernel,
        get_input_characteristic: input,
        get_output_characteristic: output,
        get_input_memory_type: default_memory,
        get_variadic_input_min_arity: one,
        get_variadic_input_homogeneity: one,
        get_variadic_output_min_arity: one,
        get_variadic_output_homogeneity: one,
        create_kernel_v2: create_kernel,
        kernel_compute_v2: compute,
        later_fields: [None; 7],
    }
}

static SKIP_LAYER_NORM_OP: CustomOp = operator(
    skip_layer_norm_name,
    (five, four),
    (skip_layer_norm_input, skip_layer_norm_output),
    compute_skip_layer_norm,
);

static ATTENTION_OP: CustomOp = operator(
    attention_name,
    (three, one_output),
    (required, required),
    compute_attention,
);

unsafe extern "C" fn attention_name(_: *const CustomOp) -> *const c_char {
    ATTENTION.as_ptr()
}
unsafe extern "C" fn three(_: *const CustomOp) -> usize {
    3
}
unsafe extern "C" fn one_output(_: *const CustomOp) -> usize {
    1
}
unsafe extern "C" fn required(_: *const CustomOp, _: usize) -> c_int {
    REQUIRED
}
unsafe extern "C" fn skip_layer_norm_name(_: *const CustomOp) -> *const c_char {
    SKIP_LAYER_NORM.as_ptr()
}
unsafe extern "C" fn cpu_provider(_: *const CustomOp) -> *const c_char {
    c"CPUExecutionProvider".as_ptr()
}
unsafe extern "C" fn float_type(_: *const CustomOp, _: usize) -> c_int {
    ELEMENT_FLOAT
}
unsafe extern "C" fn five(_: *const CustomOp) -> usize {
    5
}
unsafe extern "C" fn four(_: *const CustomOp) -> usize {
    4
}
unsafe extern "C" fn one(_: *const CustomOp) -> c_int {
    1
}
unsafe extern "C" fn default_memory(_: *const CustomOp, _: usize) -> c_int {
    0
}
/// `input`, `skip` and `gamma` are required; `beta` and `bias` optional.
unsafe extern "C" fn skip_layer_norm_input(_: *const CustomOp, index: usize) -> c_int {
    if index < 3 {
        REQUIRED
    } else {
        OPTIONAL
    }
}
unsafe extern "C" fn skip_layer_norm_output(_: *const CustomOp, index: usize) -> c_int {
    if index == 0 {
        REQUIRED
    } else {
        OPTIONAL
    }
}

/// The `OrtApi` functions used, typed.
#[derive(Clone, Copy)]
struct Ort {
    create_status: unsafe extern "C" fn(c_int, *const c_char) -> Status,
    create_custom_op_domain: unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> Status,
    custom_op_domain_add: unsafe extern "C" fn(*mut c_void, *const CustomOp) -> Status,
    add_custom_op_domain: unsafe extern "C" fn(*mut c_void, *mut c_void) -> Status,
    get_tensor_mutable_data: unsafe extern "C" fn(*mut c_void, *mut *mut c_void) -> Status,
    get_tensor_element_type: unsafe extern "C" fn(*const c_void, *mut c_int) -> Status,
    get_dimensions_count: unsafe extern "C" fn(*const c_void, *mut usize) -> Status,
    get_dimensions: unsafe extern "C" fn(*const c_void, *mut i64, usize) -> Status,
    get_tensor_type_and_shape: unsafe extern "C" fn(*const c_void, *mut *mut c_void) -> Status,
    kernel_info_get_attribute_float:
        unsafe extern "C" fn(*const c_void, *const c_char, *mut f32) -> Status,
    kernel_info_get_attribute_int64:
        unsafe extern "C" fn(*const c_void, *const c_char, *mut i64) -> Status,
    kernel_context_get_input_count: unsafe extern "C" fn(*const c_void, *mut usize) -> Status,
    kernel_context_get_output_count: unsafe extern "C" fn(*const c_void, *mut usize) -> Status,
    kernel_context_get_input:
        unsafe extern "C" fn(*const c_void, usize, *mut *const c_void) -> Status,
    kernel_context_get_output:
        unsafe extern "C" fn(*mut c_void, usize, *const i64, usize, *mut *mut c_void) -> Status,
    release_tensor_type_and_shape_info: unsafe extern "C" fn(*mut c_void),
}

impl Ort {
    /// The functions of `api`, onnxruntime's `OrtApi` table, at their positions in it (onnxruntime only
    /// ever appends to the table).
    ///
    /// # Safety
    /// `api` is onnxruntime's table of version `API_VERSION` or later.
    unsafe fn from_table(api: Api) -> Ort {
        unsafe fn at<F: Copy>(api: Api, index: usize) -> F {
            debug_assert_eq!(
                std::mem::size_of::<F>(),
                std::mem::size_of::<*const c_void>()
            );
            std::mem::transmute_copy(&*api.add(index))
        }
        Ort {
            create_status: at(api, 0),
            create_custom_op_domain: at(api, 26),
            custom_op_domain_add: at(api, 27),
            add_custom_op_domain: at(api, 28),
            get_tensor_mutable_data: at(api, 51),
            get_tensor_element_type: at(api, 60),
            get_dimensions_count: at(api, 61),
            get_dimensions: at(api, 62),
            get_tensor_type_and_shape: at(api, 65),
            kernel_info_get_attribute_float: at(api, 85),
            kernel_info_get_attribute_int64: at(api, 86),
            kernel_context_get_input_count: at(api, 88),
            kernel_context_get_output_count: at(api, 89),
            kernel_context_get_input: at(api, 90),
            kernel_context_get_output: at(api, 91),
            release_tensor_type_and_shape_info: at(api, 99),
        }
    }

    /// An onnxruntime error status carrying `message`.
    unsafe fn error(&self, message: &str) -> Status {
        let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
        (self.create_status)(ORT_INVALID_ARGUMENT, text.as_ptr())
    }
}

/// Turns a failed onnxruntime call (a non-null status) into an early return of that status.
macro_rules! check {
    ($call:expr) => {{
        let status: Status = $call;
        if !status.is_null() {
            return Err(status);
        }
    }};
}

/// A node's kernel: onnxruntime's functions and the attributes its operator reads (`epsilon` for a
/// layer normalization; `heads` and `scale` for attention).
struct Kernel {
    ort: Ort,
    epsilon: f32,
    heads: usize,
    scale: f32,
}

/// The kernel of a node of `op` (one of this library's operators), with the attributes it reads.
unsafe extern "C" fn create_kernel(
    op: *const CustomOp,
    api: Api,
    info: *const c_void,
    kernel: *mut *mut c_void,
) -> Status {
    let ort = Ort::from_table(api);
    let made = (|| {
        let mut made = Kernel {
            ort,
            epsilon: 0.0,
            heads: 0,
            scale: 0.0,
        };
        if std::ptr::eq(op, &ATTENTION_OP) {
            let heads = attribute(ort.kernel_info_get_attribute_int64, info, c"num_heads")?;
            made.scale = attribute(ort.kernel_info_get_attribute_float, info, c"scale")?;
            let Some(heads) = usize::try_from(heads).ok().filter(|&h| h > 0) else {
                return Err(ort.error(&format!("MultiHeadAttention: num_heads is {heads}")));
            };
            made.heads = heads;
        } else {
            made.epsilon = attribute(ort.kernel_info_get_attribute_float, info, c"epsilon")?;
        }
        Ok(made)
    })();
    match made {
        Ok(made) => {
            *kernel = Box::into_raw(Box::new(made)).cast();
            std::ptr::null_mut()
        }
        Err(status) => status,
    }
}

/// The node's (`info`'s) attribute `name`, read by onnxruntime's `read`.
unsafe fn attribute<T: Default>(
    read: unsafe extern "C" fn(*const c_void, *const c_char, *mut T) -> Status,
    info: *const c_void,
    name: &CStr,
) -> Result<T, Status> {
    let mut value = T::default();
    let status = read(info, name.as_ptr(), &mut value);
    if status.is_null() {
        Ok(value)
    } else {
        Err(status)
    }
}

unsafe extern "C" fn destroy_kernel(kernel: *mut c_void) {
    if !kernel.is_null() {
        drop(Box::from_raw(kernel.cast::<Kernel>()));
    }
}

/// A float tensor's shape and values.
struct Tensor {
    dims: Vec<i64>,
    data: *mut f32,
    len: usize,
}

/// Input or output `name` of operator `op`.
unsafe fn tensor(ort: &Ort, value: *const c_void, op: &str, name: &str) -> Result<Tensor, Status> {
    let mut info = std::ptr::null_mut();
    check!((ort.get_tensor_type_and_shape)(value, &mut info));
    let described = (|| {
        let (mut kind, mut count) = (0, 0usize);
        check!((ort.get_tensor_element_type)(info, &mut kind));
        if kind != ELEMENT_FLOAT {
            return Err(ort.error(&format!("{op}: {name} is not float32")));
        }
        check!((ort.get_dimensions_count)(info, &mut count));
        let mut dims = vec![0i64; count];
        check!((ort.get_dimensions)(info, dims.as_mut_ptr(), count));
        Ok(dims)
    })();
    (ort.release_tensor_type_and_shape_info)(info);
    let dims = described?;
    let len = dims.iter().try_fold(1usize, |n, &d| {
        usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
    });
    let Some(len) = len else {
        return Err(ort.error(&format!("{op}: {name} has shape {dims:?}")));
    };
    let mut data = std::ptr::null_mut();
    check!((ort.get_tensor_mutable_data)(value.cast_mut(), &mut data));
    if data.is_null() && len > 0 {
        return Err(ort.error(&format!("{op}: {name} holds no data")));
    }
    Ok(Tensor {
        dims,
        data: data.cast(),
        len,
    })
}

impl Tensor {
    unsafe fn values<'a>(&self) -> &'a [f32] {
        if self.len == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(self.data, self.len)
        }
    }
    unsafe fn values_mut<'a>(&self) -> &'a mut [f32] {
        if self.len == 0 {
            &mut []
        } else {
            std::slice::from_raw_parts_mut(self.data, self.len)
        }
    }
}

/// `compute` of `kernel` (a [`Kernel`]) in `context`, its outcome as onnxruntime takes it: no status on
/// success, its error status, or an error naming `op` if it panicked (a panic must not unwind into
/// onnxruntime).
unsafe fn guarded(
    kernel: *mut c_void,
    context: *mut c_void,
    op: &str,
    compute: unsafe fn(&Kernel, *mut c_void) -> Result<(), Status>,
) -> Status {
    let kernel = &*kernel.cast::<Kernel>();
    match catch_unwind(AssertUnwindSafe(|| compute(kernel, context))) {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(status)) => status,
        Err(_) => kernel.ort.error(&format!("{op}: the kernel panicked")),
    }
}

unsafe extern "C" fn compute_skip_layer_norm(kernel: *mut c_void, context: *mut c_void) -> Status {
    guarded(kernel, context, "SkipLayerNormalization", skip_layer_norm)
}

unsafe fn skip_layer_norm(kernel: &Kernel, context: *mut c_void) -> Result<(), Status> {
    let ort = &kernel.ort;
    let (mut inputs, mut outputs) = (0usize, 0usize);
    check!((ort.kernel_context_get_input_count)(context, &mut inputs));
    check!((ort.kernel_context_get_output_count)(context, &mut outputs));
    let operand = |index: usize, name: &str| -> Result<Option<Tensor>, Status> {
        if index >= inputs {
            return Ok(None);
        }
        let mut value = std::ptr::null();
        check!((ort.kernel_context_get_input)(context, index, &mut value));
        if value.is_null() {
            return Ok(None);
        }
        tensor(ort, value, "SkipLayerNormalization", name).map(Some)
    };
    let missing = |name: &str| ort.error(&format!("SkipLayerNormalization: no {name}"));
    let input = operand(0, "input")?.ok_or_else(|| missing("input"))?;
    let skip = operand(1, "skip")?.ok_or_else(|| missing("skip"))?;
    let gamma = operand(2, "gamma")?.ok_or_else(|| missing("gamma"))?;
    let beta = operand(3, "beta")?;
    let bias = operand(4, "bias")?;
    let output = |index: usize| -> Result<Option<Tensor>, Status> {
        if index >= outputs {
            return Ok(None);
        }
        let mut value = std::ptr::null_mut();
        check!((ort.kernel_context_get_output)(
            context,
            index,
            input.dims.as_ptr(),
            input.dims.len(),
            &mut value
        ));
        if value.is_null() {
            return Ok(None);
        }
        tensor(ort, value, "SkipLayerNormalization", "output").map(Some)
    };
    for unsupported in [1, 2] {
        if output(unsupported)?.is_some() {
            return Err(ort.error(
                "SkipLayerNormalization: the mean and inverse deviation outputs are not computed",
            ));
        }
    }
    let normalized = output(0)?.ok_or_else(|| missing("output"))?;
    let sum = output(3)?;
    let op = SkipLayerNorm {
        input: input.values(),
        skip: skip.values(),
        gamma: gamma.values(),
        beta: beta.as_ref().map(|t| t.values()),
        bias: bias.as_ref().map(|t| t.values()),
        epsilon: kernel.epsilon,
    };
    op.run(
        normalized.values_mut(),
        sum.as_ref().map(|t| t.values_mut()),
    )
    .map_err(|e| ort.error(&e.to_string()))
}

unsafe extern "C" fn compute_attention(kernel: *mut c_void, context: *mut c_void) -> Status {
    guarded(kernel, context, "MultiHeadAttention", attention)
}

unsafe fn attention(kernel: &Kernel, context: *mut c_void) -> Result<(), Status> {
    let ort = &kernel.ort;
    let operand = |index: usize, name: &str| -> Result<Tensor, Status> {
        let mut value = std::ptr::null();
        check!((ort.kernel_context_get_input)(context, index, &mut value));
        if value.is_null() {
            return Err(ort.error(&format!("MultiHeadAttention: no {name}")));
        }
        let operand = tensor(ort, value, "MultiHeadAttention", name)?;
        if operand.dims.len() != 3 {
            return Err(ort.error(&format!(
                "MultiHeadAttention: {name} has shape {:?}, not (batch, tokens, hidden)",
                operand.dims
            )));
        }
        Ok(operand)
    };
    let query = operand(0, "query")?;
    let key = operand(1, "key")?;
    let value = operand(2, "value")?;
    if key.dims[..2] != value.dims[..2] || key.dims[0] != query.dims[0] {
        return Err(ort.error(&format!(
            "MultiHeadAttention: query {:?}, key {:?} and value {:?} do not fit together",
            query.dims, key.dims, value.dims
        )));
    }
    let shape = [query.dims[0], query.dims[1], value.dims[2]];
    let mut out = std::ptr::null_mut();
    check!((ort.kernel_context_get_output)(
        context,
        0,
        shape.as_ptr(),
        shape.len(),
        &mut out
    ));
    let output = tensor(ort, out, "MultiHeadAttention", "output")?;
    // The dimensions are non-negative: `tensor` checked that they multiply out.
    let op = MultiHeadAttention {
        query: query.values(),
        key: key.values(),
        value: value.values(),
        batch: query.dims[0] as usize,
        tokens: query.dims[1] as usize,
        keys: key.dims[1] as usize,
        heads: kernel.heads,
        scale: kernel.scale,
    };
    op.run(output.values_mut())
        .map_err(|e| ort.error(&e.to_string()))
}

/// The `ai.clirkit` domain, made once (0 until then): onnxruntime keeps a pointer to it in every
/// session options it is added to, for as long as they and their sessions live.
static DOMAIN_MADE: Mutex<usize> = Mutex::new(0);

/// Adds the `ai.clirkit` operators to `options` (an `OrtSessionOptions`): what onnxruntime calls on
/// `register_custom_ops_library`.
///
/// # Safety
/// onnxruntime calls it with valid session options and its `OrtApiBase`.
#[no_mangle]
pub unsafe extern "C" fn RegisterCustomOps(
    options: *mut c_void,
    api_base: *const OrtApiBase,
) -> Status {
    if api_base.is_null() {
        return std::ptr::null_mut();
    }
    let api = ((*api_base).get_api)(API_VERSION);
    if api.is_null() {
        // An onnxruntime older than 1.16 has no table of this version (and so no way to say why): the
        // graphs that name the operators then fail to load, naming them.
        return std::ptr::null_mut();
    }
    let ort = Ort::from_table(api);
    let result = (|| -> Result<(), Status> {
        let mut made = DOMAIN_MADE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if *made == 0 {
            let mut domain = std::ptr::null_mut();
            check!((ort.create_custom_op_domain)(DOMAIN.as_ptr(), &mut domain));
            check!((ort.custom_op_domain_add)(domain, &SKIP_LAYER_NORM_OP));
            check!((ort.custom_op_domain_add)(domain, &ATTENTION_OP));
            *made = domain as usize;
        }
        check!((ort.add_custom_op_domain)(options, *made as *mut c_void));
        Ok(())
    })();
    result.err().unwrap_or(std::ptr::null_mut())
}
