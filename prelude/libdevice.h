/* teeny_tx prelude: CUDA's libdevice math functions (parsed after language.h).
 *
 * The C names of CUDA's Math API, which are Triton's libdevice names too. Float functions take
 * f16, bf16, f32 and f64 tiles or scalars and give the same dtype (f16/bf16 computed in f32 and
 * rounded once); on the GPU each is CUDA's function, within the error CUDA documents for it;
 * the interpreter computes in f64 and rounds once (lower/ops/libdevice.py says where that is
 * not the correctly rounded value).
 */

/* ---- math: trigonometric, hyperbolic, exponential and logarithmic (libdevice) -------------- */
tile tan(tile x);                   /* tangent                                                  */
tile asin(tile x);                  /* arcsine, in [-pi/2, pi/2]                                */
tile acos(tile x);                  /* arccosine, in [0, pi]                                    */
tile atan(tile x);                  /* arctangent, in [-pi/2, pi/2]                             */
tile atan2(tile y, tile x);         /* the angle of the point (x, y), in [-pi, pi]              */
tile sinpi(tile x);                 /* sin(pi x), exact at multiples of 1/2                     */
tile cospi(tile x);                 /* cos(pi x), exact at multiples of 1/2                     */
tile sinh(tile x);                  /* hyperbolic sine                                          */
tile cosh(tile x);                  /* hyperbolic cosine                                        */
tile asinh(tile x);                 /* inverse hyperbolic sine                                  */
tile acosh(tile x);                 /* inverse hyperbolic cosine                                */
tile atanh(tile x);                 /* inverse hyperbolic tangent                               */
tile exp10(tile x);                 /* 10^x                                                     */
tile expm1(tile x);                 /* e^x - 1, accurate near 0                                 */
tile log10(tile x);                 /* base-10 logarithm                                        */
tile log1p(tile x);                 /* log(1 + x), accurate near 0                              */
tile cbrt(tile x);                  /* cube root                                                */
tile rcbrt(tile x);                 /* 1 / cbrt(x)                                              */
tile hypot(tile x, tile y);         /* sqrt(x^2 + y^2) without overflow                         */
tile rhypot(tile x, tile y);        /* 1 / hypot(x, y)                                          */
tile norm3d(tile a, tile b, tile c);          /* sqrt(a^2 + b^2 + c^2) without overflow         */
tile rnorm3d(tile a, tile b, tile c);         /* 1 / norm3d(a, b, c)                            */
tile norm4d(tile a, tile b, tile c, tile d);  /* sqrt(a^2 + b^2 + c^2 + d^2) without overflow   */
tile rnorm4d(tile a, tile b, tile c, tile d); /* 1 / norm4d(a, b, c, d)                         */

/* ---- math: special functions (libdevice) ----------------------------------------------------- */
tile erfc(tile x);                  /* 1 - erf(x) without cancellation                          */
tile erfinv(tile x);                /* inverse error function, x in [-1, 1]                     */
tile erfcinv(tile x);               /* inverse complementary error function, x in [0, 2]        */
tile erfcx(tile x);                 /* e^(x^2) erfc(x)                                          */
tile normcdf(tile x);               /* standard normal CDF                                      */
tile normcdfinv(tile x);            /* inverse of normcdf, x in [0, 1]                          */
tile lgamma(tile x);                /* log |gamma(x)|                                           */
tile tgamma(tile x);                /* gamma function                                           */
tile j0(tile x);                    /* Bessel function of the first kind, order 0               */
tile j1(tile x);                    /* Bessel function of the first kind, order 1               */
tile cyl_bessel_i0(tile x);         /* modified Bessel function of the first kind, order 0      */
tile cyl_bessel_i1(tile x);         /* modified Bessel function of the first kind, order 1      */

/* ---- math: rounding, remainders and the parts of floats (libdevice; exact) ------------------- */
tile trunc(tile x);                 /* round toward zero                                        */
tile round(tile x);                 /* round half away from zero                                */
tile rint(tile x);                  /* round half to even                                       */
tile nearbyint(tile x);             /* round half to even                                       */
tile fmod(tile x, tile y);          /* x - trunc(x / y) y (C's fmod; `%` on floats)             */
tile remainder(tile x, tile y);     /* x - rint(x / y) y (IEEE remainder)                       */
tile copysign(tile x, tile y);      /* |x| with the sign of y                                   */
tile fdim(tile x, tile y);          /* x - y where x > y, else 0                                */
tile nextafter(tile x, tile y);     /* the next f32/f64 after x toward y                        */
tile ldexp(tile x, tile n);         /* x * 2^n, n an integer                                    */
tile scalbn(tile x, tile n);        /* x * 2^n, n an integer                                    */
tile logb(tile x);                  /* the binary exponent of x, as a float                     */
tile ilogb(tile x);                 /* the binary exponent of x, i32                            */
tile llrint(tile x);                /* rounded half to even, i64                                */
tile llround(tile x);               /* rounded half away from zero, i64                         */
tile isnan(tile x);                 /* bool: x is a NaN                                         */
tile isinf(tile x);                 /* bool: x is infinite                                      */
tile isfinite(tile x);              /* bool: x is neither infinite nor a NaN                    */
tile signbit(tile x);               /* bool: x's sign bit is set                                */

/* ---- math: integer bits (libdevice; 32- and 64-bit integers) --------------------------------- */
tile popc(tile x);                  /* the number of set bits, i32                              */
tile clz(tile x);                   /* the number of leading zero bits, i32                     */
tile ffs(tile x);                   /* the position of the lowest set bit from 1 (0 for 0), i32 */
tile brev(tile x);                  /* the bits reversed                                        */
tile umulhi(tile x, tile y);        /* the high half of the unsigned product                    */
