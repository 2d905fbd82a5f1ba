/* teeny_tx prelude: helpers for matrix products, written in the language (inlined at each call).
 *
 * Grouped program order (Triton's GROUP_SIZE_M, the L2 reuse of its matmul tutorial). A 1-D
 * grid of num_m * num_n programs computes a num_m x num_n grid of output tiles. Taken row by
 * row, consecutive programs would share one row of A and sweep all of B; grouped, they walk
 * group_m rows of tiles column by column, so the programs in flight at once read group_m rows
 * of A and a few columns of B, which stay in L2. For num_m = 4, num_n = 3, group_m = 2:
 *
 *   pid:   0 2 4        pid_m = group_pid_m(pid, 4, 3, 2)
 *          1 3 5        pid_n = group_pid_n(pid, 4, 3, 2)
 *          6 8 10
 *          7 9 11
 *
 * The last group has fewer rows when group_m does not divide num_m. group_m = 1 is row order.
 * Both take the same arguments; pid is in [0, num_m * num_n).
 */

/* Row (0 .. num_m - 1) of the output tile program pid computes, in groups of group_m rows. */
i32 group_pid_m(i32 pid, i32 num_m, i32 num_n, i32 group_m)
{
    i32 width = group_m * num_n;
    i32 first_m = pid / width * group_m;
    i32 rows = minimum(num_m - first_m, group_m);
    return first_m + pid % width % rows;
}

/* Column (0 .. num_n - 1) of the output tile program pid computes, in groups of group_m rows. */
i32 group_pid_n(i32 pid, i32 num_m, i32 num_n, i32 group_m)
{
    i32 width = group_m * num_n;
    i32 first_m = pid / width * group_m;
    i32 rows = minimum(num_m - first_m, group_m);
    return pid % width / rows;
}
