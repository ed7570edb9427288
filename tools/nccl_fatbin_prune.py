"""Zeroes the device code of libnccl.so.2 that one GPU architecture does not need.

Usage: nccl_fatbin_prune.py LIBNCCL [SM OUT]. Lists the fatbin's entries; with SM (e.g. 90)
and OUT, writes a copy that keeps only that architecture's cubins (the rest, and the
relocatable fatbin, zeroed: it then compresses to a fraction). `tools/dev gpu-pack` uses it to
take a current NCCL to a GPU host within the size it can receive (see README, "GPU tests").
From the project's shared tools (2 Dec 2026).
"""
import struct, sys, collections
path = sys.argv[1]
data = bytearray(open(path, 'rb').read())
# locate sections via readelf-like parsing (ELF64)
import subprocess
out = subprocess.check_output(['readelf', '-S', '-W', path]).decode()
secs = {}
for line in out.splitlines():
    parts = line.replace('[ ', '[').split()
    if len(parts) > 6 and parts[0].startswith('['):
        name = parts[1]
        try:
            off = int(parts[4], 16); size = int(parts[5], 16)
        except ValueError:
            continue
        secs[name] = (off, size)
off, size = secs['.nv_fatbin']
pos, end = off, off + size
stats = collections.Counter(); nbytes = collections.Counter()
conts = 0; entries = []
while pos < end:
    magic, ver, hsize, fsize = struct.unpack_from('<IHHQ', data, pos)
    if magic != 0xBA55ED50:
        # skip padding zeros
        if data[pos:pos+8] == b'\0'*8:
            pos += 8; continue
        print('bad magic at', hex(pos), hex(magic)); break
    conts += 1
    e = pos + hsize; cend = pos + hsize + fsize
    while e < cend:
        kind, ever, ehsize, psize = struct.unpack_from('<HHIQ', data, e)
        arch = struct.unpack_from('<I', data, e + 28)[0]
        flags = struct.unpack_from('<Q', data, e + 40)[0] if ehsize >= 48 else 0
        entries.append((e, kind, ehsize, psize, arch, flags))
        stats[(kind, arch)] += 1; nbytes[(kind, arch)] += psize
        e += ehsize + psize
    if e != cend: print('entry misalign', hex(e), hex(cend))
    pos = cend
print('containers', conts, 'entries', len(entries))
for k in sorted(stats): print(k, stats[k], round(nbytes[k]/2**20, 2), 'MiB')
if len(sys.argv) > 2:
    keep_arch = int(sys.argv[2])
    z = 0
    for (e, kind, ehsize, psize, arch, flags) in entries:
        if not (kind == 2 and arch == keep_arch):
            data[e + ehsize: e + ehsize + psize] = b'\0' * psize; z += psize
    ro, rs = secs['__nv_relfatbin']
    data[ro: ro + rs] = b'\0' * rs
    open(sys.argv[3], 'wb').write(data)
    print('zeroed fatbin MiB', round(z/2**20, 1), 'relfatbin MiB', round(rs/2**20, 1))
