"""Source policy of the FP16 GEMM task: what a submission may contain and what its kernel sources may say.

The Judge compiles the candidate's kernel into its own runner process, so the policy is what keeps the kernel from
doing the work with a library, from touching anything but the GPU, and from writing the runner's result line. It is
conservative on purpose: a construct it cannot see through is refused, with the file, line and reason.

Allowed surface of the submission (anything else, and every symlink, is refused):
  JUDGE_VERSION            one line: the name of the kernel to judge, [a-z0-9][a-z0-9_-]{0,63}
  kernels/NAME.cu          kernel sources (the one JUDGE_VERSION names is checked and compiled; the others are
                           earlier attempts, never compiled)
  kernels/NAME.cuh         headers they include with #include "NAME.cuh"
  NOTES.md                 the agent's notes (never compiled)

Usage: python3 policy.py WORKSPACE  -> prints "ok <kernel>" or one "refused: ..." line per breach; exit 0 / 1.
Imported by judge.py (check_submission).
"""
import os
import re
import stat
import sys

MAX_FILES = 64
MAX_SOURCE_BYTES = 256 * 1024
VERSION_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
SOURCE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.(cu|cuh)$")

ALLOWED_SYSTEM_INCLUDES = {
    "cuda_fp16.h", "cuda_bf16.h", "cuda_runtime.h", "mma.h", "cuda_pipeline.h", "cuda_awbarrier.h",
    "cuda/pipeline", "cuda/barrier", "cuda/ptx", "cuda/std/cstdint", "cuda/std/type_traits", "cuda/std/utility",
    "cooperative_groups.h", "cooperative_groups/memcpy_async.h", "cooperative_groups/reduce.h",
    "cstdint", "stdint.h", "cstddef", "stddef.h", "climits", "cfloat", "type_traits", "utility",
}
ALLOWED_DIRECTIVES = {"include", "pragma", "define", "undef", "if", "ifdef", "ifndef", "elif", "else", "endif"}
ALLOWED_PRAGMA_RE = re.compile(r"^(unroll(\s*\(?\s*\d+\s*\)?)?|nounroll|once)$")

# The CUDA runtime calls, types and constants a kernel may name (everything else starting with "cuda" is refused:
# allocation, streams, events, graphs, host callbacks, device management, copies to or from the host).
ALLOWED_CUDA = {
    "cudaStream_t", "cudaError_t", "cudaSuccess", "cudaGetLastError", "cudaPeekAtLastError",
    "cudaFuncSetAttribute", "cudaFuncAttributeMaxDynamicSharedMemorySize",
    "cudaFuncAttributePreferredSharedMemoryCarveout", "cudaFuncAttributeRequiredClusterWidth",
    "cudaFuncAttributeRequiredClusterHeight", "cudaFuncAttributeRequiredClusterDepth",
    "cudaFuncAttributeNonPortableClusterSizeAllowed", "cudaSharedmemCarveoutMaxShared",
    "cudaMemsetAsync", "cudaMemcpyAsync", "cudaMemcpyDeviceToDevice",
    "cudaLaunchKernelEx", "cudaLaunchConfig_t", "cudaLaunchAttribute", "cudaLaunchAttributeClusterDimension",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cudaGetDevice", "cudaDeviceGetAttribute",
}
ALLOWED_CUDA_PREFIXES = ("cudaDevAttr",)

# identifier -> reason; checked on every identifier outside comments and string literals
FORBIDDEN = {}
for _n in ("system popen fork vfork clone execl execlp execle execv execvp execve execvpe posix_spawn posix_spawnp "
           "kill raise abort exit _exit _Exit quick_exit at_quick_exit atexit signal sigaction setjmp longjmp "
           "sigsetjmp siglongjmp pthread_create pthread_kill sleep usleep nanosleep ptrace prctl setuid setgid "
           "seteuid syscall daemon").split():
    FORBIDDEN[_n] = "process control"
for _n in ("fopen freopen fdopen open openat creat read write pread pwrite readv writev fread fwrite fgets fputs "
           "fgetc fputc fscanf scanf sscanf vscanf gets getchar getc putchar putc puts perror fflush fclose close "
           "ifstream ofstream fstream filebuf cin cout cerr clog wcout wcerr stdin stdout stderr FILE "
           "socket connect bind listen accept send recv sendto recvfrom sendmsg recvmsg getaddrinfo gethostbyname "
           "mmap munmap mprotect ioctl dup dup2 dup3 pipe fcntl getenv secure_getenv setenv putenv unsetenv "
           "environ __environ opendir readdir unlink remove rename").split():
    FORBIDDEN[_n] = "file, network or environment I/O"
for _n in "printf fprintf dprintf vprintf vfprintf sprintf snprintf vsprintf vsnprintf".split():
    FORBIDDEN[_n] = "printing (the runner's result line is the runner's alone)"
for _n in "malloc calloc realloc free aligned_alloc posix_memalign memalign valloc new delete".split():
    FORBIDDEN[_n] = "host memory allocation (use the workspace argument)"
for _n in "main extern __attribute__ __declspec constructor destructor gnu weak alias visibility".split():  # extern __shared__ aside
    FORBIDDEN[_n] = "code that runs outside the kernel call or binds to the runner's symbols"
for _n in ("dlopen dlsym dlmopen dlvsym __builtin_frame_address __builtin_return_address "
           "__builtin_extract_return_addr _Pragma __pragma").split():
    FORBIDDEN[_n] = "reaching past the kernel interface"
# refused only as std::NAME (threadIdx and a variable called `thread` are fine)
NAMESPACED_FORBIDDEN = {"thread": "process control", "jthread": "process control", "async": "process control",
                        "system": "process control", "exit": "process control", "getenv": "environment I/O"}
# words after which a name is a value, not a declaration
NOT_A_TYPE = {"return", "throw", "case", "co_return", "co_yield", "sizeof", "decltype", "typeid", "alignof",
              "noexcept", "new", "delete", "goto", "else", "do", "using", "typedef", "operator", "template"}
# compiler builtins a kernel may use; every other __builtin_* is refused (__builtin_printf, __builtin_frame_address)
ALLOWED_BUILTINS = {"__builtin_expect", "__builtin_assume", "__builtin_assume_aligned", "__builtin_unreachable",
                    "__builtin_trap", "__builtin_clz", "__builtin_ctz", "__builtin_popcount", "__builtin_ffs"}
# libc internals reachable by name
INTERNAL_PREFIXES = ("__libc", "_IO_", "__sys", "__GI_", "__x64_", "__open", "__read", "__write", "__close")
# any name starting with one of these (case-insensitive); the short ones (cub, at, c10) only as namespaces, below
LIBRARY_PREFIXES = ("cublas", "cutlass", "cute", "cudnn", "cusparse", "cusolver", "cufft", "curand", "nvrtc",
                    "nvjitlink", "nccl", "thrust", "triton", "torch")
LIBRARY_EXACT = {"cub", "cute", "thrust", "cutlass", "at", "c10", "torch", "triton"}

# Inline PTX: the first word of every statement must be one of these instruction families.
PTX_ALLOWED = {
    "mma", "wgmma", "ldmatrix", "stmatrix", "cp", "mbarrier", "fence", "bar", "barrier", "ld", "st", "cvt", "cvta",
    "mov", "setmaxnreg", "elect", "add", "sub", "mul", "mad", "fma", "min", "max", "and", "or", "xor", "not", "shl",
    "shr", "selp", "setp", "prmt", "shf", "shfl", "red", "atom", "griddepcontrol", "prefetch", "tensormap",
    "movmatrix", "neg", "abs", "bfe", "bfi", "lop3", "bra", "mapa", "getctarank", "activemask", "vote", "match",
    "redux", "sad", "popc", "clz", "brev", "div", "rem", "rcp", "sqrt", "ex2", "lg2", "tanh", "copysign", "testp",
    "slct", "dp4a", "dp2a", "isspacep", "ldu", "discard", "applypriority", "createpolicy", "tcgen05", "nanosleep",
}
# reading clocks or counters lets a kernel notice it is being timed
PTX_FORBIDDEN_TEXT = re.compile(r"%(globaltimer\w*|clock(64)?|envreg\d*|pm\d+\w*)\b")


class Breach(Exception):
    pass


def _refuse(breaches, path, line, why):
    breaches.append("%s:%d: %s" % (path, line, why) if line else "%s: %s" % (path, why))


def walk_submission(root):
    """The allowed surface: [(relative path, absolute path)] of kernel sources, the version, and breaches."""
    breaches = []
    sources = {}
    version = None
    count = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(dirnames + filenames):
            count += 1
            rel = name if rel_dir == "." else rel_dir + "/" + name
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if count > MAX_FILES:
                _refuse(breaches, rel, 0, "more than %d entries in the submission" % MAX_FILES)
                return sources, version, breaches
            if stat.S_ISLNK(st.st_mode):
                _refuse(breaches, rel, 0, "is a symlink; the submission holds regular files only")
                continue
            if stat.S_ISDIR(st.st_mode):
                if rel != "kernels":
                    _refuse(breaches, rel, 0, "directory outside the allowed surface (only kernels/)")
                continue
            if not stat.S_ISREG(st.st_mode):
                _refuse(breaches, rel, 0, "is not a regular file")
                continue
            if rel == "JUDGE_VERSION":
                version = full
            elif rel == "NOTES.md":
                pass
            elif rel_dir == "kernels" and SOURCE_NAME_RE.match(name):
                if st.st_size > MAX_SOURCE_BYTES:
                    _refuse(breaches, rel, 0, "is %d bytes, over %d" % (st.st_size, MAX_SOURCE_BYTES))
                else:
                    sources[rel] = full
            else:
                _refuse(breaches, rel, 0, "outside the allowed surface (JUDGE_VERSION, kernels/NAME.cu, "
                        "kernels/NAME.cuh, NOTES.md)")
        dirnames[:] = [d for d in dirnames if (d == "kernels" and rel_dir == ".")]
    return sources, version, breaches


def read_version(path, sources, breaches):
    if path is None:
        _refuse(breaches, "JUDGE_VERSION", 0, "missing: it names the kernel to judge (kernels/NAME.cu)")
        return None
    with open(path, "rb") as f:
        data = f.read(200)
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        text = ""
    if not VERSION_RE.match(text):
        _refuse(breaches, "JUDGE_VERSION", 1, "expected one kernel name matching [a-z0-9][a-z0-9_-]{0,63}")
        return None
    if "kernels/%s.cu" % text not in sources:
        _refuse(breaches, "JUDGE_VERSION", 1, "names %s, but kernels/%s.cu is not in the submission" % (text, text))
        return None
    return text


# ---- source scanning ------------------------------------------------------------------------------------------

TOKEN_RE = re.compile(
    r"""(?P<ws>[ \t\r\f\v]+)
      | (?P<nl>\n)
      | (?P<lcomment>//[^\n]*)
      | (?P<bcomment>/\*.*?\*/)
      | (?P<string>(?:u8|u|U|L)?"(?:[^"\\\n]|\\.)*")
      | (?P<char>(?:u8|u|U|L)?'(?:[^'\\\n]|\\.)*')
      | (?P<number>\.?[0-9](?:[eEpP][+-]|[0-9A-Za-z_.'])*)
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<punct>::|->|\#\#|<:|:>|<%|%>|%:|[^\sA-Za-z0-9_])""",
    re.S | re.X,
)


def tokenize(text, path, breaches):
    """[(kind, value, line)] after line splicing; comments dropped. Unterminated constructs are breaches."""
    toks = []
    pos, line = 0, 1
    while pos < len(text):
        m = TOKEN_RE.match(text, pos)
        if m is None:
            _refuse(breaches, path, line, "cannot read the source here (unterminated comment, string or character)")
            return toks
        kind = m.lastgroup
        value = m.group(kind)
        if kind == "punct" and (value in ("\"", "'") or text.startswith("/*", pos)):
            _refuse(breaches, path, line, "cannot read the source here (unterminated comment, string or character)")
            return toks
        if kind not in ("ws", "lcomment", "bcomment"):
            toks.append((kind, value, line))
        line += value.count("\n")
        pos = m.end()
    return toks


def splice(text):
    """Translation phase 2: backslash-newline joins lines (so `pri\\<newline>ntf` is seen as printf). Line numbers
    are kept by moving the newline to the end of the joined line."""
    out, pending = [], 0
    for raw in text.split("\n"):
        if raw.endswith("\\"):
            out.append(raw[:-1])
            pending += 1
        else:
            out.append(raw + "\n" * (pending + 1))
            pending = 0
    return "".join(out)[:-1] if out else ""


def check_ptx(text, path, line, breaches):
    if PTX_FORBIDDEN_TEXT.search(text):
        _refuse(breaches, path, line, "inline PTX reads a timer, performance counter or environment register")
    for stmt in re.split(r"[;\n]", text):
        s = stmt.strip()
        s = re.sub(r"^[{}\s]+|[{}\s]+$", "", s)
        s = re.sub(r"^[A-Za-z_$][A-Za-z0-9_$]*:\s*", "", s)  # a label
        s = re.sub(r"^@!?%?[A-Za-z0-9_]+\s+", "", s)  # a predicate guard
        if not s:
            continue
        if s.startswith("."):
            if not re.match(r"^\.reg\b", s):
                _refuse(breaches, path, line, "inline PTX directive %r escapes the policy (only .reg)" % s.split()[0])
            continue
        base = re.split(r"[.\s]", s, 1)[0]
        if base not in PTX_ALLOWED:
            _refuse(breaches, path, line, "inline PTX instruction %r escapes the policy" % s.split()[0][:40])


def check_tokens(toks, path, local_headers, breaches):
    i = 0
    at_line_start = True
    n = len(toks)
    while i < n:
        kind, value, line = toks[i]
        if kind == "nl":
            at_line_start = True
            i += 1
            continue
        if value in ("%:", "<%", "%>") or (value == "#" and not at_line_start) or value == "##":
            _refuse(breaches, path, line, "preprocessor operator %r (stringizing, token pasting or digraphs) is "
                    "refused: it can assemble names the policy would refuse" % value)
        if value == "#" and at_line_start:
            i = check_directive(toks, i, path, local_headers, breaches)
            at_line_start = False
            continue
        at_line_start = False
        if kind == "string":
            if "ASSAY-GEMM" in value:
                _refuse(breaches, path, line, "a string that looks like the runner's result line")
        elif kind == "ident":
            check_identifier(toks, i, path, breaches)
            if value in ("asm", "__asm__", "__asm"):
                i = check_asm(toks, i, path, breaches)
                continue
        elif value == "\\":
            _refuse(breaches, path, line, "a backslash outside a string (universal character names such as \\u0070 "
                    "can spell any name) is refused")
        elif value == "(" and i + 2 < n and toks[i + 1][1] == "*" and toks[i + 2][1] == ")":
            _refuse(breaches, path, line, "function pointer types are refused: the kernel interface is the only call")
        i += 1


def check_identifier(toks, i, path, breaches):
    value, line = toks[i][1], toks[i][2]
    prev = toks[i - 1][1] if i > 0 else ""
    nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
    # A name that only declares something of its own is fine (struct S { int read; }; a.read; void f(int write)):
    # member access, or a declaration `TYPE NAME` followed by ; = , [ ) {. Anything else (a call, &name, name as a
    # value) is refused.
    prev_kind = toks[i - 1][0] if i > 0 else ""
    declares = (prev_kind == "ident" and prev not in NOT_A_TYPE) and nxt in (";", "=", ",", "[", ")", "{")
    member = prev in (".", "->") or declares
    if value == "extern" and nxt == "__shared__":
        return  # dynamic shared memory: extern __shared__ T smem[];
    if value in FORBIDDEN and not member:
        _refuse(breaches, path, line, "%s: %s is refused" % (FORBIDDEN[value], value))
        return
    if value.startswith("__builtin_") and value not in ALLOWED_BUILTINS:
        _refuse(breaches, path, line, "compiler builtin %s is refused" % value)
        return
    if value.startswith(INTERNAL_PREFIXES):
        _refuse(breaches, path, line, "libc internals (%s) are refused" % value)
        return
    if value in NAMESPACED_FORBIDDEN and prev == "::":
        _refuse(breaches, path, line, "%s: ::%s is refused" % (NAMESPACED_FORBIDDEN[value], value))
        return
    low = value.lower()
    if value in LIBRARY_EXACT and (nxt == "::" or prev == "namespace"):
        _refuse(breaches, path, line, "a library that does the work (%s) is refused" % value)
        return
    if low.startswith(LIBRARY_PREFIXES):
        _refuse(breaches, path, line, "a library that does the work (%s) is refused" % value)
        return
    if value.startswith("cuda") and len(value) > 4 and value[4].isupper():
        if value not in ALLOWED_CUDA and not value.startswith(ALLOWED_CUDA_PREFIXES):
            why = "extra streams, events or graphs" if re.match(r"cuda(Stream|Event|Graph|LaunchHostFunc)", value) \
                else "a CUDA runtime call outside the kernel's allowance (allocation, copies to or from the host, " \
                     "device management)"
            _refuse(breaches, path, line, "%s: %s is refused" % (why, value))
        return
    if re.match(r"^(cu[A-Z]|CU[a-z_]|CU$|CUDA_)", value) and not re.match(r"^CUDA_(VERSION|ARCH)", value):
        _refuse(breaches, path, line, "the CUDA driver API (%s) is refused" % value)
        return
    if value.startswith("assay_") and value != "assay_gemm_fp16":
        _refuse(breaches, path, line, "names of the runner (%s) are not part of the interface" % value)


def check_asm(toks, i, path, breaches):
    line = toks[i][2]
    j = i + 1
    while j < len(toks) and toks[j][1] in ("volatile", "__volatile__", "inline"):
        j += 1
    if j < len(toks) and toks[j][1] == "goto":
        _refuse(breaches, path, line, "asm goto is refused")
        return j + 1
    if j >= len(toks) or toks[j][1] != "(":
        _refuse(breaches, path, line, "inline assembly must be asm(\"...\" ...)")
        return j
    j += 1
    text = []
    while j < len(toks) and toks[j][0] in ("string", "nl"):
        if toks[j][0] == "string":
            lit = toks[j][1]
            text.append(lit[lit.index('"') + 1:-1].replace("\\n", "\n").replace("\\t", " "))
        j += 1
    if not text:
        _refuse(breaches, path, line, "inline assembly whose text is not a string literal is refused")
        return j
    check_ptx("".join(text), path, line, breaches)
    return j


def check_directive(toks, i, path, local_headers, breaches):
    line = toks[i][2]
    j = i + 1
    if j >= len(toks) or toks[j][0] == "nl":
        return j
    name = toks[j][1]
    rest = []
    k = j + 1
    while k < len(toks) and toks[k][0] != "nl":
        rest.append(toks[k])
        k += 1
    if name not in ALLOWED_DIRECTIVES:
        _refuse(breaches, path, line, "preprocessor directive #%s is refused" % name)
        return k
    if name == "include":
        check_include(rest, path, line, local_headers, breaches)
        return k
    if name == "pragma":
        text = " ".join(t[1] for t in rest)
        if not ALLOWED_PRAGMA_RE.match(text.replace(" ( ", "(").replace(" )", ")")):
            _refuse(breaches, path, line, "#pragma %s is refused (only unroll, nounroll, once)" % text[:40])
        return k
    # define, undef and conditionals: their tokens are checked like any other code
    for t in range(j + 1, k):
        if toks[t][0] == "string" and "ASSAY-GEMM" in toks[t][1]:
            _refuse(breaches, path, line, "a string that looks like the runner's result line")
        if toks[t][1] in ("#", "##", "%:"):
            _refuse(breaches, path, line, "preprocessor operator %r (stringizing or token pasting) is refused" % toks[t][1])
        elif toks[t][1] == "\\":
            _refuse(breaches, path, line, "a backslash outside a string is refused (universal character names)")
        elif toks[t][0] == "ident":
            check_identifier(toks, t, path, breaches)
            if toks[t][1] in ("asm", "__asm__", "__asm"):
                _refuse(breaches, path, line, "inline assembly inside a macro is refused")
    return k


def check_include(rest, path, line, local_headers, breaches):
    if len(rest) == 1 and rest[0][0] == "string":
        target = rest[0][1][1:-1]
        if target == "gemm.h" or target in local_headers:
            return
        _refuse(breaches, path, line, "#include \"%s\": only \"gemm.h\" and headers in kernels/ (NAME.cuh)" % target)
        return
    if len(rest) >= 3 and rest[0][1] == "<" and rest[-1][1] == ">":
        target = "".join(t[1] for t in rest[1:-1])
        if target in ALLOWED_SYSTEM_INCLUDES:
            return
        _refuse(breaches, path, line, "#include <%s> is not on the allowed list" % target)
        return
    _refuse(breaches, path, line, "#include must name a header literally (\"NAME.cuh\" or <header>)")


def check_source(rel, text, local_headers):
    breaches = []
    try:
        text.encode("ascii")
    except UnicodeEncodeError:
        for no, ln in enumerate(text.split("\n"), 1):
            if any(ord(ch) > 127 for ch in ln):
                _refuse(breaches, rel, no, "non-ASCII characters are refused in kernel sources")
                break
        return breaches
    if "??" in text and re.search(r"\?\?[=/'()!<>-]", text):
        _refuse(breaches, rel, 0, "trigraphs are refused")
    spliced = splice(text)
    raw = re.search(r'(?<![A-Za-z0-9_])(u8|u|U|L)?R"', spliced)
    if raw:
        _refuse(breaches, rel, spliced.count("\n", 0, raw.start()) + 1, "raw string literals are refused")
        return breaches
    toks = tokenize(spliced, rel, breaches)
    check_tokens(toks, rel, local_headers, breaches)
    return breaches


def check_submission(root):
    """(kernel name or None, [breach lines]). The submission passes when the list is empty."""
    sources, version_path, breaches = walk_submission(root)
    version = read_version(version_path, sources, breaches)
    local_headers = {os.path.basename(r) for r in sources if r.endswith(".cuh")}
    # what is compiled: the selected kernel and every header (any of them may be included); other NAME.cu files
    # are earlier attempts, never compiled, never copied into the build
    compiled = [r for r in sorted(sources) if r.endswith(".cuh") or (version and r == "kernels/%s.cu" % version)]
    for rel in compiled:
        with open(sources[rel], "rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            _refuse(breaches, rel, 0, "is not UTF-8 text")
            continue
        breaches.extend(check_source(rel, text, local_headers))
    return (version if not breaches else None), breaches


def main(argv):
    if len(argv) != 2:
        print("usage: policy.py WORKSPACE", file=sys.stderr)
        return 2
    version, breaches = check_submission(argv[1])
    for b in breaches:
        print("refused: " + b)
    if breaches:
        return 1
    print("ok " + version)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
