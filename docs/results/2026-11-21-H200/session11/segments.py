import re, sys
pat = re.compile(r"DB pe=(\d) seg=(\d\d) (.{26}) put\((\d+)\): mean +([\d.]+) max +([\d.]+) \(b *(-?\d+)\) \| other: min +([\d.]+) mean +([\d.]+) max +([\d.]+) \(b *(-?\d+)\)")
files = sys.argv[1:]
data = []
for f in files:
    segs = {}
    for m in pat.finditer(open(f).read()):
        segs[int(m.group(2))] = m.groups()  # the last print wins (second repeat)
    data.append(segs)
print("seg  time of the code before the mark      " + " | ".join(f"PE{k}: put mean/max  other min/mean/max" for k in range(len(files))))
for s in sorted(data[0]):
    g0 = data[0][s]
    cells = []
    for d in data:
        g = d[s]
        cells.append(f"{float(g[4]):5.2f}/{float(g[5]):5.2f}  {float(g[7]):5.2f}/{float(g[8]):5.2f}/{float(g[9]):5.2f}")
    print(f"{s:2d} {g0[2]} " + " | ".join(cells))
