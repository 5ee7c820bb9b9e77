#!/usr/bin/env python3
# Behaviour-preserving kernel refactors: compares two nvcc -keep builds kernel by kernel.
# Build each side with: nvcc -std=c++17 -arch=sm_90a -O3 -I src -I ../../kernels/src -keep -keep-dir DIR -c X.cu
# (every .cu holding the kernels), then: python3 scripts/cubin-compare.py BEFORE_DIR AFTER_DIR [KERNEL_KEY [LINES]]
# KEY matches sm90_bf16_attention_decode_paged instantiations (edit KEY for another family).
#  - SASS: the bytes of each kernel's .text.<kernel> section in the sm_90a cubin (nvcc -keep), plus its
#    .nv.info.<kernel> (registers, params, attributes), .nv.shared.<kernel> size and .rel* sections;
#  - PTX: each .entry body, with mangled names reduced to their last identifier.
# usage: compare.py BEFORE_DIR AFTER_DIR  (searches *.cubin and *.compute_90a.ptx under each)
import glob, re, struct, sys

KEY = re.compile(r'sm90_bf16_attention_decode_pagedILi(\d)ELi(\d)ELb(\d)ELb(\d)E')

def kernel_key(name):
    m = KEY.search(name)
    return None if not m else 'NB=%s W=%s cluster=%s fused=%s' % m.groups()

def sections(path):
    b = open(path, 'rb').read()
    shoff, = struct.unpack_from('<Q', b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', b, 0x3A)
    hdrs = []
    for i in range(shnum):
        name, typ, flags, addr, off, size, link, info, align, entsize = struct.unpack_from('<IIQQQQIIQQ', b, shoff + i * shentsize)
        hdrs.append((name, typ, off, size))
    stroff = hdrs[shstrndx][2]
    out = {}
    for name, typ, off, size in hdrs:
        n = b[stroff + name:b.index(b'\0', stroff + name)].decode()
        data = b'' if typ == 8 else b[off:off + size]  # NOBITS: size only
        out[n] = (size, data)
    # symbol names for the relocations (.symtab entries: name, info, other, shndx, value, size)
    symtab, strtab = out.get('.symtab', (0, b''))[1], out.get('.strtab', (0, b''))[1]
    names = [strtab[struct.unpack_from('<I', symtab, i)[0]:strtab.index(b'\0', struct.unpack_from('<I', symtab, i)[0])].decode()
             for i in range(0, len(symtab), 24)]
    for n in list(out):
        if n.startswith('.rela'):
            size, data = out[n]
            rel = []
            for i in range(0, len(data), 24):
                off, info, add = struct.unpack_from('<QQq', data, i)
                rel.append((off, info & 0xffffffff, add, canon_name(names[info >> 32])))
            out[n] = (size, repr(rel).encode())
        elif n.startswith('.nv.info.'):
            out[n] = (out[n][0], nv_info_without_symbols(out[n][1]))
    return out

def nv_info_without_symbols(d):
    # records: format byte, attribute byte, then (format 4) u16 size + data, else 2 bytes;
    # EIATTR_PARAM_CBANK (0x0a) starts with the symbol index of .nv.constant0.<kernel>: zeroed
    i, out = 0, bytearray()
    while i < len(d):
        fmt, attr = d[i], d[i + 1]
        n = int.from_bytes(d[i + 2:i + 4], 'little') + 4 if fmt == 4 else 4
        rec = bytearray(d[i:i + n])
        if fmt == 4 and attr == 0x0a: rec[4:8] = b'\0\0\0\0'
        out += rec
        i += n
    return bytes(out)

def canon_name(x):
    return re.sub(r'\b_Z\w+', canon, x)

def sass(d):
    per = {}
    for cub in glob.glob(d + '/**/*.cubin', recursive=True):
        for n, (size, data) in sections(cub).items():
            k = kernel_key(n)
            if not k: continue
            kind = n.split('._Z')[0]
            per.setdefault(k, {})[kind] = (size, data)
    return per

def canon(m):
    # a mangled name by its role: the kernel's params, a static shared variable (by its own name),
    # the kernel itself; the namespace (anonymous in one TU vs decode_attn) is not compared
    x = m.group(0)
    pm = re.search(r'_param_(\d+)$', x)
    if pm: return 'PARAM_' + pm.group(1)
    if x.startswith('_ZZ'): return 'SHARED_' + re.search(r'E\d+(\w+)$', x).group(1)
    if KEY.search(x): return 'KERNEL'
    nm = re.match(r'_ZN5dcuda(?:11decode_attn)?(?:\d+_GLOBAL__N__\w+?_cu_[0-9a-f]{8})?\d+(\w+)E$', x)
    if nm: return 'NSVAR_' + nm.group(1)
    return x

def ptx(d):
    per = {}
    for f in glob.glob(d + '/**/*.compute_90a.ptx', recursive=True):
        text = open(f).read()
        for m in re.finditer(r'\.entry (\S+)\(.*?\n\}\n', text, re.S):
            k = kernel_key(m.group(1))
            if not k: continue
            body = m.group(0)
            body = re.sub(r'\b_Z\w+', canon, body)
            body = re.sub(r'\$L__BB\d+_', '$L__BB_', body)
            body = re.sub(r'__local_depot\d+', '__local_depot', body)
            body = '\n'.join(l for l in body.split('\n') if not l.strip().startswith(('.loc', '.file')))
            per[k] = body
    return per

b, a = sys.argv[1], sys.argv[2]
sb, sa, pb, pa = sass(b), sass(a), ptx(b), ptx(a)
keys = sorted(set(sb) | set(sa))
print('kernels: before %d, after %d (SASS); before %d, after %d (PTX)' % (len(sb), len(sa), len(pb), len(pa)))
bad = 0
for k in keys:
    x, y = sb.get(k, {}), sa.get(k, {})
    res = []
    for kind in sorted(set(x) | set(y)):
        if x.get(kind) != y.get(kind):
            res.append('%s differs (%s vs %s bytes)' % (kind, x.get(kind, (None,))[0], y.get(kind, (None,))[0]))
    ptx_same = pb.get(k) is not None and pb.get(k) == pa.get(k)
    text = x.get('.text')
    line = '%-34s SASS .text %s (%s bytes), %s; PTX %s' % (
        k, 'identical' if text and text == y.get('.text') else 'DIFFERS', text[0] if text else '-',
        'other sections identical (%s)' % ', '.join(sorted(s for s in x if s != '.text')) if not res else '; '.join(res),
        'identical' if ptx_same else 'DIFFERS')
    if res or not ptx_same: bad += 1
    print(line)
print('RESULT: %d of %d kernels differ' % (bad, len(keys)))
if len(sys.argv) > 3:
    import difflib
    k = sys.argv[3]
    print('\n'.join(list(difflib.unified_diff(pb[k].split('\n'), pa[k].split('\n'), lineterm='', n=1))[:int(sys.argv[4]) if len(sys.argv) > 4 else 80]))
