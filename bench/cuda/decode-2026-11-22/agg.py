import csv, sys, statistics, re
path, name = sys.argv[1], sys.argv[2]
rows = []
with open(path) as f:
    lines = [l for l in f if l.startswith('"')]
r = list(csv.reader(lines))
if len(r) < 3:
    print(f"{name}: no kernels profiled"); sys.exit()
hdr = r[0]; data = r[2:]
ki = hdr.index("Kernel Name"); ti = hdr.index("gpu__time_duration.sum")
bi = hdr.index("dram__bytes_read.sum"); wi = hdr.index("dram__bytes_write.sum")
gi = hdr.index("Grid Size") if "Grid Size" in hdr else None
units = r[1]
def num(s): return float(s.replace(",", ""))
tscale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1, "us": 1, "msecond": 1e3, "ms": 1e3}.get(units[ti], 1)
U = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9}
bscale = U.get(units[bi], 1)
wscale = U.get(units[wi], 1)
print("units", units[ti], units[bi])
order, agg = [], {}
for d in data:
    k = d[ki]
    k = re.sub(r"\(.*", "", k)
    k = k.replace("(anonymous namespace)::", "")
    if len(k) > 60: k = k[:60]
    key = (k, d[gi] if gi is not None else "")
    if key not in agg: agg[key] = []; order.append(key)
    agg[key].append((num(d[ti]) * tscale, num(d[bi]) * bscale, num(d[wi]) * wscale))
tot = 0
print(f"-- {name}")
for key in order:
    v = agg[key]
    t = statistics.median(x[0] for x in v); b = statistics.median(x[1] for x in v); w = statistics.median(x[2] for x in v)
    tot += t
    print(f"  {key[0]:<60} grid {key[1]:<14} n={len(v):<3} {t:8.2f} us  read {b/1e6:8.2f} MB ({b/t/1e3 if t else 0:6.0f} GB/s)  write {w/1e6:6.2f} MB")
print(f"  sum of medians {tot:.2f} us")
