"""te, strategies and kernels from Python, each kernel checked against numpy."""

import numpy as np
import pytest

import tessera
from tessera import strategy as s
from tessera import te


def matmul(n=64):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis(n, "k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], [k]), name="C")
    return te.lower("matmul", [A, B, C])


def test_compute_names_loops_after_the_lambda():
    X = te.placeholder((8, 16), name="X")
    Y = te.compute((8, 16), lambda y, x: X[y, x] * 2.0 + 1.0, name="Y")
    p = te.lower("scale", [X, Y])
    assert [b[0] for b in p.inputs] == ["X"] and [b[0] for b in p.outputs] == ["Y"]
    text = str(p)
    assert "for y" in text and "for x" in text


def test_a_strategy_written_in_python_applies_and_builds_a_correct_kernel():
    def tile(x, y, fx, fy):  # Elevate's tile as a user-defined composition
        return s.split(x, fx) >> s.split(y, fy) >> s.reorder(
            f"{x}.outer", f"{y}.outer", f"{x}.inner", f"{y}.inner")

    schedule = (tile("i", "j", 16, 16) >> s.reorder("i.outer", "j.outer", "k", "i.inner", "j.inner")
                >> s.vectorize("j.inner") >> s.parallel("i.outer"))
    assert schedule.text.startswith("split(i, 16) ; split(j, 16) ; reorder(")
    p = tessera.apply(schedule, matmul())
    assert "parallel" in str(p) and "vectorized" in str(p)
    kernel = tessera.build(p)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 64, 64), dtype=np.float32)
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)
    out = np.zeros((64, 64), np.float32)
    assert kernel(a, b, out) is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    assert "tsr_main" in kernel.source


def test_the_text_form_and_values_agree():
    parsed = s.parse("split(i, 8) ; (vectorize(i.inner) <+ id)")
    built = s.split("i", 8) >> (s.vectorize("i.inner") | s.id())
    assert parsed.text == built.text
    assert str(tessera.apply(parsed, matmul(16))) == str(tessera.apply(built, matmul(16)))


def test_a_strategy_that_does_not_apply_raises_with_its_reason():
    with pytest.raises(tessera.StrategyFailed) as failure:
        tessera.apply(s.split("nope", 4), matmul(16))
    assert failure.value.kind == "not_applicable"
    assert "nope" in failure.value.reason
    # try_ and lchoice recover from it.
    p = matmul(16)
    assert str(tessera.apply(s.try_(s.split("nope", 4)), p)) == str(p)


def test_a_rule_written_in_python():
    seen = []

    def split_once(p):
        seen.append(p.name)
        return None if len(seen) > 1 else tessera.apply(s.split("i", 2), p)

    r = s.rule("split_once", split_once)
    p = tessera.apply(s.repeat(r), matmul(16))
    assert seen == ["matmul", "matmul"] and "i.outer" in str(p)

    def broken(p):
        raise ValueError("broken rule")

    with pytest.raises(tessera.StrategyFailed) as failure:
        tessera.apply(s.rule("broken", broken), p)
    assert failure.value.kind == "internal_error" and "broken rule" in failure.value.reason


def test_an_operator_of_the_library_against_its_reference():
    op = tessera.operator("conv2d:N=1,C=8,H=10,W=10,O=16,K=3,S=1,P=1")
    x, w = op.random_inputs(seed=3)
    kernel = tessera.build(tessera.apply(s.parallel("o"), op.program))
    np.testing.assert_allclose(kernel(x, w), op.reference(x, w), rtol=1e-4, atol=1e-4)
    assert op.flops == 2 * 16 * 10 * 10 * 8 * 9


def test_elementwise_math_and_select():
    X = te.placeholder((4, 33), name="X")
    Y = te.compute((4, 33), lambda i, j: te.select(X[i, j] > 0.0, te.exp(X[i, j]),
                                                   te.tanh(X[i, j])), name="Y")
    kernel = tessera.build(te.lower("act", [X, Y]))
    x = np.linspace(-3, 3, 4 * 33, dtype=np.float32).reshape(4, 33)
    np.testing.assert_allclose(kernel(x), np.where(x > 0, np.exp(x), np.tanh(x)), rtol=1e-5)


def test_kernel_timing():
    kernel = tessera.build(matmul(32))
    a = np.ones((32, 32), np.float32)
    t = kernel.time(a, a, repeat=3, min_repeat_ms=1)
    assert len(t.seconds_per_run) == 3 and t.median > 0


def test_bad_input_is_a_tessera_error_with_one_line():
    kernel = tessera.build(matmul(16))
    with pytest.raises(tessera.Error, match="shape"):
        kernel(np.ones((16, 15), np.float32), np.ones((16, 16), np.float32))
    with pytest.raises(tessera.Error, match="takes 2 inputs"):
        kernel(np.ones((16, 16), np.float32))
    a = np.ones((16, 16), np.float32)
    with pytest.raises(tessera.Error, match="overlaps"):
        kernel(a, a, a)
    with pytest.raises(tessera.Error, match="column"):
        s.parse("split(i, ")
    with pytest.raises(tessera.Error, match="unknown dtype"):
        te.placeholder((2,), name="A", dtype="complex")
    with pytest.raises(TypeError, match="truth value"):
        bool(te.placeholder((2,), name="A")[0] > 1.0)
    with pytest.raises(tessera.Error):
        tessera.operator("conv2d:N=1")
    with pytest.raises(tessera.Error):
        tessera.set_num_threads(99999)


def test_traversals_over_the_programs_statements():
    p = matmul(16)
    # The first loop named j, found top-down, unrolled; the program still computes a matmul.
    unrolled = tessera.apply(s.body(s.top_down(s.is_loop("j") >> s.unroll_loop_here())), p)
    assert "unrolled for j in" in str(unrolled) and str(unrolled).count("unrolled") == 1
    a, b = np.random.default_rng(4).standard_normal((2, 16, 16), dtype=np.float32)
    np.testing.assert_allclose(tessera.build(unrolled)(a, b), a @ b, rtol=1e-4, atol=1e-4)
    # position counts, in pre-order, the places where the strategy applies: i.init, j.init, i.
    third = tessera.apply(s.body(s.position(2, s.unroll_loop_here())), p)
    assert "unrolled for i in" in str(third) and str(third).count("unrolled") == 1
    with pytest.raises(tessera.StrategyFailed):
        tessera.apply(s.body(s.top_down(s.is_loop("nope"))), p)
