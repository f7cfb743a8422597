"""The minifier: `python -m dynamo minify SCRIPT.py` shrinks a failing jitted program.

Stage order (the driver, `command.py`, is the one module that knows it): `record` runs the
user's script with every `dynamo.jit` wrapping its backend in a recording one that checks
each compiled graph against eager (frame level); `shrink` delta-debugs the first failing FX
graph (graph level, then op level); `repro` writes the result as a standalone script, which
`command` runs in a new process to confirm. `compare` is the check all of them share: a
backend's run of one graph against eager's (values, dtypes, shapes, exceptions, written
inputs, inductor's compiler-error fallbacks). See docs/troubleshooting.md, "Minifying a
failure".
"""
