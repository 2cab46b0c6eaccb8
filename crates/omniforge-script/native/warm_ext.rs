//! `_omniforge_warm`: the one thing a warm template's forked child cannot do in Python, as a
//! CPython extension module (stable ABI, `abi3`): apply a Landlock ruleset to itself.
//!
//! The server builds each call's ruleset with the crate's Landlock code (the `landlock`
//! crate, `warm/confine.rs`) and hands the child the ruleset's descriptor; the child calls
//! `_omniforge_warm.restrict_self(fd)` before it says it is ready, long before any tool code
//! runs. No ruleset is built here and nothing is parsed: two system calls.
//!
//! Compiled by the crate's `build.rs` with `rustc` alone (`no_std`, no dependencies, the
//! CPython symbols resolved when the interpreter loads it), embedded in the crate
//! (`include_bytes!`), written next to the template and bound read-only into its sandbox.
//! Like `sys.rs`, every `unsafe` here is a foreign call with its SAFETY note.

#![no_std]
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

use core::ffi::{c_char, c_int, c_long, c_void};
use core::ptr::{addr_of_mut, null_mut};

/// `PyObject` of a regular (not free-threaded) CPython build: the layout the stable ABI fixes.
#[repr(C)]
pub struct PyObject {
    ob_refcnt: isize,
    ob_type: *mut c_void,
}

#[repr(C)]
struct PyModuleDef_Base {
    ob_base: PyObject,
    m_init: Option<unsafe extern "C" fn() -> *mut PyObject>,
    m_index: isize,
    m_copy: *mut PyObject,
}

type PyCFunction = unsafe extern "C" fn(*mut PyObject, *mut PyObject) -> *mut PyObject;

#[repr(C)]
struct PyMethodDef {
    ml_name: *const c_char,
    ml_meth: Option<PyCFunction>,
    ml_flags: c_int,
    ml_doc: *const c_char,
}

#[repr(C)]
struct PyModuleDef {
    m_base: PyModuleDef_Base,
    m_name: *const c_char,
    m_doc: *const c_char,
    m_size: isize,
    m_methods: *mut PyMethodDef,
    m_slots: *mut c_void,
    m_traverse: *mut c_void,
    m_clear: *mut c_void,
    m_free: *mut c_void,
}

/// `METH_O`: one positional argument.
const METH_O: c_int = 0x0008;
/// `PYTHON_ABI_VERSION`: the stable ABI's module API version.
const PYTHON_ABI_VERSION: c_int = 3;
/// `landlock_restrict_self(2)`: the same number on every Linux architecture.
const SYS_LANDLOCK_RESTRICT_SELF: c_long = 446;
/// `prctl(PR_SET_NO_NEW_PRIVS)`.
const PR_SET_NO_NEW_PRIVS: c_int = 38;

unsafe extern "C" {
    fn abort() -> !;
    fn syscall(number: c_long, ...) -> c_long;
    fn prctl(option: c_int, ...) -> c_int;
    fn PyModule_Create2(def: *mut PyModuleDef, api: c_int) -> *mut PyObject;
    fn PyLong_AsLong(object: *mut PyObject) -> c_long;
    fn PyErr_Occurred() -> *mut PyObject;
    fn PyErr_SetFromErrno(kind: *mut PyObject) -> *mut PyObject;
    fn Py_IncRef(object: *mut PyObject);
    static mut PyExc_OSError: *mut PyObject;
    static mut _Py_NoneStruct: PyObject;
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    // SAFETY: abort(3) takes no argument and never returns.
    unsafe { abort() }
}

/// `restrict_self(fd: int) -> None`: `no_new_privs`, then `landlock_restrict_self(fd, 0)`;
/// `OSError` with the kernel's errno when either fails.
unsafe extern "C" fn restrict_self(_module: *mut PyObject, arg: *mut PyObject) -> *mut PyObject {
    // SAFETY: `arg` is the borrowed argument CPython passes to a METH_O function.
    let fd = unsafe { PyLong_AsLong(arg) };
    // SAFETY: PyErr_Occurred only reads the thread's error indicator (the GIL is held).
    if fd == -1 && !unsafe { PyErr_Occurred() }.is_null() {
        return null_mut();
    }
    // SAFETY: prctl and syscall take plain integers here; they touch no memory of ours.
    let failed = unsafe {
        prctl(PR_SET_NO_NEW_PRIVS, 1 as c_long, 0 as c_long, 0 as c_long, 0 as c_long) != 0
            || syscall(SYS_LANDLOCK_RESTRICT_SELF, fd, 0 as c_long) != 0
    };
    if failed {
        // SAFETY: PyExc_OSError is CPython's exported exception type; the call reads errno.
        return unsafe { PyErr_SetFromErrno(PyExc_OSError) };
    }
    // SAFETY: Py_None is a static object; a new reference to it is the conventional result.
    unsafe {
        let none = addr_of_mut!(_Py_NoneStruct);
        Py_IncRef(none);
        none
    }
}

static mut METHODS: [PyMethodDef; 2] = [
    PyMethodDef {
        ml_name: c"restrict_self".as_ptr(),
        ml_meth: Some(restrict_self),
        ml_flags: METH_O,
        ml_doc: c"restrict_self(fd): no_new_privs, then landlock_restrict_self(fd, 0).".as_ptr(),
    },
    PyMethodDef {
        ml_name: core::ptr::null(),
        ml_meth: None,
        ml_flags: 0,
        ml_doc: core::ptr::null(),
    },
];

static mut MODULE: PyModuleDef = PyModuleDef {
    m_base: PyModuleDef_Base {
        ob_base: PyObject {
            ob_refcnt: 1,
            ob_type: null_mut(),
        },
        m_init: None,
        m_index: 0,
        m_copy: null_mut(),
    },
    m_name: c"_omniforge_warm".as_ptr(),
    m_doc: c"OmniForge warm templates: Landlock for a forked child.".as_ptr(),
    m_size: -1,
    m_methods: null_mut(),
    m_slots: null_mut(),
    m_traverse: null_mut(),
    m_clear: null_mut(),
    m_free: null_mut(),
};

/// The module's entry point, called once by the interpreter that imports it.
///
/// # Safety
/// Called by CPython's import machinery with the GIL held.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PyInit__omniforge_warm() -> *mut PyObject {
    // SAFETY: the statics are touched only here, once, under the GIL; CPython keeps the
    // definition for the interpreter's lifetime (it is static).
    unsafe {
        let module = addr_of_mut!(MODULE);
        (*module).m_methods = addr_of_mut!(METHODS).cast();
        PyModule_Create2(module, PYTHON_ABI_VERSION)
    }
}
