# The ctypes binding of libopforge_gpu (gpu/evaluator/gpulib.py, the C ABI of gpu/opforge_gpu.h), checked against a stand-in library compiled from C here: argument passing, tensor pointers, stream handles and freeing of every returned string.
import shutil
import subprocess

import pytest
import torch

FAKE_LIB_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct session { int device; char cache_dir[256]; };
static int live_strings;
static int freed_handles;

static char *out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static char *out(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = malloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    live_strings++;
    return s;
}

int fake_live_strings(void) { return live_strings; }
int fake_freed_handles(void) { return freed_handles; }

int ofg_session_open(int device, const char *cache_dir, void **ret_session, char *err,
                     size_t errlen)
{
    if (device == 99) {
        snprintf(err, errlen, "no device %d", device);
        return -1;
    }
    struct session *s = calloc(1, sizeof *s);
    s->device = device;
    snprintf(s->cache_dir, sizeof s->cache_dir, "%s", cache_dir ? cache_dir : "(none)");
    *ret_session = s;
    return 0;
}

void ofg_session_free(void *session) { free(session); }

char *ofg_device_info(void *session)
{
    struct session *s = session;
    return out("{\"name\":\"Fake GPU\",\"index\":%d,\"cache_dir\":\"%s\",\"sm_count\":132}",
               s->device, s->cache_dir);
}

char *ofg_candidate_prepare(void *session, const char *candidate, const char *tensors)
{
    (void)session;
    if (strstr(candidate, "null_reply"))
        return NULL;
    if (strstr(candidate, "bad_json"))
        return out("this is not json");
    return out("{\"ok\":true,\"handle\":5,\"compile\":{\"ok\":true},\"candidate\":%s,"
               "\"tensors\":%s}", candidate, tensors);
}

static unsigned long long ptr_of(const char *json, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\", \"ptr\": ", name);
    const char *p = strstr(json, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* output:0[0] = 2 * input:0[0], through the pointers the evaluator passed */
char *ofg_candidate_run(void *session, int handle, const char *pointers,
                        unsigned long long stream)
{
    (void)session;
    float *in = (float *)(uintptr_t)ptr_of(pointers, "input:0");
    float *o = (float *)(uintptr_t)ptr_of(pointers, "output:0");
    if (in && o)
        o[0] = 2.0f * in[0];
    return out("{\"ok\":true,\"sticky\":false,\"failure\":null,\"handle\":%d,\"stream\":%llu,"
               "\"pointers\":%s}", handle, stream, pointers);
}

char *ofg_candidate_time(void *session, int handle, const char *pointers,
                         unsigned long long stream, const char *timing)
{
    (void)session; (void)pointers;
    return out("{\"ok\":true,\"median_ms\":1.5,\"mean_ms\":1.6,\"reps\":10,\"rse\":0.001,"
               "\"handle\":%d,\"stream\":%llu,\"timing\":%s}", handle, stream, timing);
}

void ofg_candidate_free(void *session, int handle) { (void)session; (void)handle; freed_handles++; }

static float *bound_in, *bound_out;
static unsigned long long last_stream;

unsigned long long fake_last_stream(void) { return last_stream; }

/* Keeps the pointers; handle 6 refuses them. NULL means success. */
char *ofg_candidate_bind(void *session, int handle, const char *pointers)
{
    (void)session;
    if (handle == 6)
        return out("{\"ok\":false,\"sticky\":false,\"failure\":{\"stage\":\"protocol\","
                   "\"class\":\"protocol/bad_pointers\",\"message\":\"%s\"}}", "no");
    bound_in = (float *)(uintptr_t)ptr_of(pointers, "input:0");
    bound_out = (float *)(uintptr_t)ptr_of(pointers, "node:y");
    return NULL;
}

/* node:y[0] = 3 * input:0[0] through the bound pointers; handle 8 has none bound. */
char *ofg_candidate_enqueue(void *session, int handle, unsigned long long stream)
{
    (void)session;
    last_stream = stream;
    if (handle == 8)
        return out("{\"ok\":false,\"sticky\":false,\"failure\":{\"stage\":\"protocol\","
                   "\"class\":\"protocol/not_bound\",\"message\":\"candidate 8\"}}");
    bound_out[0] = 3.0f * bound_in[0];
    return NULL;
}

void ofg_string_free(char *s)
{
    if (s) {
        live_strings--;
        free(s);
    }
}
"""


@pytest.fixture(scope="module")
def fake_so(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in libopforge_gpu")
    d = tmp_path_factory.mktemp("fakelib")
    src = d / "fake.c"
    src.write_text("#include <stdint.h>\n" + FAKE_LIB_C)
    so = d / "libfake_opforge_gpu.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(so), str(src)],
                   check=True)
    return so


def test_session_and_device_info(ev_module, fake_so):
    lib = ev_module.GpuLib(str(fake_so))
    lib.open(3, "/tmp/cubins")
    assert lib.device_info() == {"name": "Fake GPU", "index": 3, "cache_dir": "/tmp/cubins",
                                 "sm_count": 132}
    assert lib.dll.fake_live_strings() == 0


def test_session_open_error_message(ev_module, fake_so):
    lib = ev_module.GpuLib(str(fake_so))
    with pytest.raises(RuntimeError, match="no device 99"):
        lib.open(99, None)


def test_prepare_run_time_free(ev_module, fake_so):
    lib = ev_module.GpuLib(str(fake_so))
    lib.open(0, None)
    cand = {"source": "extern \"C\" __global__ void k() {}", "options": ["-DX=1"],
            "plan": {"launches": []}}
    tensors = {"tensors": [{"name": "input:0", "dtype": "float32", "numel": 4, "bytes": 16}],
               "precision": "fp32"}
    prep = lib.prepare(cand, tensors)
    assert prep["ok"] is True and prep["handle"] == 5
    assert prep["candidate"] == cand and prep["tensors"] == tensors

    x = torch.tensor([1.25, 0, 0, 0])
    y = torch.zeros(4)
    named = [("input:0", x), ("output:0", y)]
    r = lib.run(5, named, 123456789012)
    assert r["ok"] is True and r["handle"] == 5 and r["stream"] == 123456789012
    assert r["pointers"] == {"tensors": [{"name": "input:0", "ptr": x.data_ptr()},
                                         {"name": "output:0", "ptr": y.data_ptr()}]}
    assert y[0].item() == 2.5  # the library wrote through the pointer

    timing = dict(ev_module.TIMING)
    t = lib.time(5, named, 7, timing)
    assert (t["median_ms"], t["reps"], t["stream"], t["timing"]) == (1.5, 10, 7, timing)
    lib.free(5)
    assert lib.dll.fake_freed_handles() == 1
    assert lib.dll.fake_live_strings() == 0  # every returned string was freed


def test_bind_and_enqueue(ev_module, fake_so):
    lib = ev_module.GpuLib(str(fake_so))
    lib.open(0, None)
    assert lib.has_enqueue is True
    x = torch.tensor([2.0, 0, 0, 0])
    y = torch.zeros(4)
    assert lib.bind(5, [("input:0", x), ("node:y", y)]) is None  # NULL: success
    assert lib.enqueue(5, 4242) is None
    assert y[0].item() == 6.0 and lib.dll.fake_last_stream() == 4242
    failure = lib.bind(6, [("input:0", x)])
    assert failure["failure"]["class"] == "protocol/bad_pointers"
    assert lib.enqueue(8, 1)["failure"]["class"] == "protocol/not_bound"
    assert lib.dll.fake_live_strings() == 0


def test_library_without_enqueue_runs_no_regions(ev_module, fake_so, tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    src = tmp_path / "old.c"
    text = "#include <stdint.h>\n" + FAKE_LIB_C
    src.write_text(text[:text.index("static float *bound_in")]
                   + text[text.index("void ofg_string_free"):])
    so = tmp_path / "libold.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    lib = ev_module.GpuLib(str(so))
    assert lib.has_enqueue is False
    with pytest.raises(ev_module.EvalError) as info:
        lib.bind(5, [])
    assert info.value.cls == "load/gpu_library"


def test_null_and_garbage_replies(ev_module, fake_so):
    lib = ev_module.GpuLib(str(fake_so))
    lib.open(0, None)
    with pytest.raises(ev_module.EvalError) as info:
        lib.prepare({"source": "null_reply"}, {"tensors": []})
    assert info.value.cls == "gpu_library/null_reply"
    with pytest.raises(ev_module.EvalError) as info:
        lib.prepare({"source": "bad_json"}, {"tensors": []})
    assert info.value.cls == "gpu_library/bad_reply"
    assert "this is not json" in info.value.message
    assert lib.dll.fake_live_strings() == 0


def test_missing_library_raises_oserror(ev_module, tmp_path):
    with pytest.raises(OSError):
        ev_module.GpuLib(str(tmp_path / "nope.so"))
