/* Each program writes its own number into the elements it owns. */
kernel whoami(i32 *out, i32 n, const i32 BLOCK)
{
    i32 pid = program_id(0);
    tile offs = pid * BLOCK + arange(0, BLOCK);
    store(out + offs, pid, offs < n);
}
