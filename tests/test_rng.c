// test_rng.c: Philox4x32-10 against the Random123 known-answer vectors, and the
// distributions built on it.
#include <math.h>

#include "test_util.h"

static void test_known_answers(void **state) {
    // Random123 kat_vectors: philox4x32 10 rounds
    Philox4 r = philox4x32(0, 0, 0, 0, 0, 0);
    assert_int_equal(r.v[0], 0x6627e8d5u);
    assert_int_equal(r.v[1], 0xe169c58du);
    assert_int_equal(r.v[2], 0xbc57ac4cu);
    assert_int_equal(r.v[3], 0x9b00dbd8u);
    r = philox4x32(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
    assert_int_equal(r.v[0], 0x408f276du);
    assert_int_equal(r.v[1], 0x41c83b0eu);
    assert_int_equal(r.v[2], 0xa20bc7c6u);
    assert_int_equal(r.v[3], 0x6d5451fdu);
    r = philox4x32(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
    assert_int_equal(r.v[0], 0xd16cfe09u);
    assert_int_equal(r.v[1], 0x94fdccebu);
    assert_int_equal(r.v[2], 0x5001e420u);
    assert_int_equal(r.v[3], 0x24126ea1u);
}

static void test_uniform_and_normal_moments(void **state) {
    const int n = 200000;
    double su = 0, su2 = 0, sn = 0, sn2 = 0, sn4 = 0;
    float umin = 1, umax = 0;
    for (int i = 0; i < n; i++) {
        float u = philox_uniform(77, (uint64_t)i);
        float z = philox_normal(77, (uint64_t)i);
        assert_true(u >= 0.0f && u < 1.0f);
        assert_false(isnan(z) || isinf(z));
        su += u;
        su2 += (double)u * u;
        sn += z;
        sn2 += (double)z * z;
        sn4 += (double)z * z * z * z;
        if (u < umin) umin = u;
        if (u > umax) umax = u;
    }
    double mu = su / n, vu = su2 / n - mu * mu, mz = sn / n, vz = sn2 / n - mz * mz;
    printf("  uniform: mean %.4f var %.4f (1/2, 1/12=%.4f); normal: mean %.4f var %.4f kurt %.3f\n",
           mu, vu, 1.0 / 12, mz, vz, sn4 / n / (vz * vz));
    // 5-sigma bounds for n = 200000
    assert_true(fabs(mu - 0.5) < 5 * sqrt(1.0 / 12 / n));
    assert_true(fabs(vu - 1.0 / 12) < 0.002);
    assert_true(fabs(mz) < 5 / sqrt((double)n));
    assert_true(fabs(vz - 1.0) < 0.02);
    assert_true(fabs(sn4 / n / (vz * vz) - 3.0) < 0.1);
    assert_true(umin < 1e-4f && umax > 1.0f - 1e-4f);
}

static void test_streams_differ(void **state) {
    // different seeds and counters give different words; same (seed, counter) the same
    assert_true(philox_uniform(1, 5) == philox_uniform(1, 5));
    assert_true(philox_uniform(1, 5) != philox_uniform(2, 5));
    assert_true(philox_uniform(1, 5) != philox_uniform(1, 6));
    assert_true(philox_uniform(1, (uint64_t)1 << 40) != philox_uniform(1, 0));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_uniform_and_normal_moments),
        cmocka_unit_test(test_streams_differ),
    };
    return cmocka_run_group_tests_name("rng", tests, NULL, NULL);
}
