#!/usr/bin/env python3
"""`ringlet report` rendered by a real browser (a meson test).

usage: report_browser.py RINGLET_BINARY

Trains 2 short epochs on 2 ranks with --trace_steps 2, writes the run's report.html and has
Debian's headless Chromium render it to a PNG, with the network cut off (the page must need
nothing from anywhere). The PNG is decoded here (zlib and the five PNG row filters) and must not
be blank: enough non-white pixels, many colours, and blocks of the colours the timelines fill
their boxes with (RS steps' blue, forward spans' orange, step spans' grey). Exits
77 (meson's SKIP), saying why, without chromium-headless-shell or chromium.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77
WIDTH, HEIGHT = 1000, 3000


def browser():
    for name in ("chromium-headless-shell", "chromium"):
        path = shutil.which(name)
        if path:
            return path
    return None


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode_png(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, idat, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, f"unexpected PNG format {header}"
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = previous[i]
            c = previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + paeth(a, b, c)) & 0xFF
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        previous = line
    return width, height, rows


def near(pixel, colour, tolerance=40):
    return all(abs(p - c) <= tolerance for p, c in zip(pixel, colour))


def main():
    ringlet = sys.argv[1]
    chrome = browser()
    if chrome is None:
        print("skipped: no chromium-headless-shell or chromium to render the page "
              "(scripts/install-deps.sh --report installs it)")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="ringlet_report_") as tmp:
        run = os.path.join(tmp, "run")
        subprocess.run([ringlet, "train", "--nproc", "2", "--epochs", "2", "--limit_train", "512",
                        "--limit_test", "128", "--batch_size", "32", "--log_every", "2",
                        "--threads", "1", "--workers", "1", "--trace_steps", "2", "--out", run],
                       check=True, timeout=240)
        subprocess.run([ringlet, "report", run], check=True, timeout=60)
        page, png = os.path.join(run, "report.html"), os.path.join(tmp, "report.png")
        shot = subprocess.run(
            [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
             f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={png}", "file://" + page],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        if shot.returncode != 0 or not os.path.exists(png):
            print(shot.stdout)
            print(f"FAIL: {chrome} did not render {page} (exit {shot.returncode})")
            return 1
        width, height, rows = decode_png(png)
    pixels = [p for row in rows for p in row]
    inked = sum(1 for p in pixels if min(p) < 235)
    colours = {(r >> 4, g >> 4, b >> 4) for r, g, b in pixels}
    # Colours that fill the timelines' boxes (blocks of thousands of pixels), where the charts
    # draw the same hues only as thin lines and legend swatches (well under 3000 pixels).
    wanted = {"blue (RS steps)": (31, 119, 180), "orange (forward spans)": (255, 127, 14),
              "grey (step spans)": (199, 199, 199)}
    found = {name: sum(1 for p in pixels if near(p, c)) for name, c in wanted.items()}
    print(f"{width}x{height} screenshot: {inked} pixels inked ({100 * inked / len(pixels):.1f}%), "
          f"{len(colours)} colours; {found}")
    failures = []
    if inked < 0.01 * len(pixels):
        failures.append("the page rendered (nearly) blank")
    if len(colours) < 16:
        failures.append(f"only {len(colours)} colours: the charts did not draw")
    for name, count in found.items():
        if count < 3000:
            failures.append(f"{count} pixels of {name}: that part did not draw")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
