"""The warp-specialized Gluon fp8 GEMM (kernels/fp8_gemm_ws.py, round 15). Gluon has no
interpreter: its numerics are checked on the GPU (benchmarks/gpu/fp8_ws15.py, every launch
against float64 first, raw rows in benchmarks/results/r15/); here, without a GPU: the kernel's own
work-split and chunk helpers run on Python ints (.fn: their arithmetic is plain integer Python),
the refusal off Hopper, and the kernel compiled for an H100 (sm_90a) with ptxas."""
import pytest
import torch
from _gluon_build import build_sm90

from profkit.kernels import fp8_gemm_ws as W


def chunks(nk, chunk, off):
    """[c0, c1) of each promotion chunk of nk k tiles, as the kernel's _n_chunks/_chunk give them."""
    first = chunk - off
    return [W._chunk.fn(c, nk, chunk, first) for c in range(W._n_chunks.fn(nk, chunk, first))]


@pytest.mark.parametrize("k_tiles", [1, 7, 8, 9, 16, 17, 32, 64, 112, 148])
@pytest.mark.parametrize("chunk,off", [(16, 0), (16, 8), (8, 4), (32, 16), (1, 0)])
def test_chunks_cover_k_once_and_never_exceed_the_promotion_interval(k_tiles, chunk, off):
    b = chunks(k_tiles, chunk, off)
    assert b[0][0] == 0 and b[-1][1] == k_tiles
    assert all(k1 == n0 for (_, k1), (n0, _) in zip(b, b[1:]))  # contiguous, no k tile twice
    assert all(0 < k1 - k0 <= chunk for k0, k1 in b)  # the error bound's interval, never longer
    if k_tiles > chunk - off:
        assert b[0] == (0, chunk - off)  # the staggered warpgroup promotes half a chunk early


def test_staggered_warpgroups_promote_at_different_k():
    ends0 = {k1 for _, k1 in chunks(148, 16, 0)}
    ends1 = {k1 for _, k1 in chunks(148, 16, 8)}
    assert ends0 & ends1 == {148}  # only the tile's end is shared


def test_refuses_off_hopper_with_reason():
    if W.available() is None:
        pytest.skip("a Hopper GPU is here: the GPU scripts check the numerics")
    a = torch.zeros(4, 32).to(torch.float8_e4m3fn)
    with pytest.raises(NotImplementedError, match="gluon_ws"):
        W.fp8_gemm_ws(a, a, torch.ones(1), torch.ones(1))


def test_compiles_for_h100_warp_specialized_without_spills_or_serialized_mma():
    """Built for sm_90a: a loader at 24 registers and consumers raised to 232 (setmaxnreg), 16
    m64n128k32 e4m3 wgmma (2 warpgroups x (peeled + loop) x 4 k-steps), and ptxas neither
    serializes the wgmma pipeline (C7511/C7515) nor spills."""
    sig = {"a_desc": ["fp8e4nv", [128, 128]], "b_desc": ["fp8e4nv", [128, 128]], "c_desc": ["bf16", [64, 128]],
           "SA": "*fp32", "SB": "*fp32", "WS": "*fp32", "FLAGS": "*i32", "M": "i32", "N": "i32", "K": "i32",
           "SK_TILES": "i32", "S_STRIDE": "i32"}
    got = build_sm90("profkit.kernels.fp8_gemm_ws", "_fp8_gemm_ws", sig,
                     dict(STAGES=5, CHUNK=16, STAGGER=True, GROUP_M=8, NPROG=132, CONSUMER_REGS=232))
    assert got["rc"] == 0, got["err"]
    assert got["wgmma"] == {"m64n128k32": 16}
    assert 24 in got["regs"] and 232 in got["regs"]
    assert got["serialized"] == [] and got["spills"] == ["0"]
    assert 5 * 2 * 128 * 128 + 2 * 64 * 128 * 2 <= got["shared"] <= 227 * 1024  # 5 stages of A and B, two C tiles


def work(pid, tiles, sk, k_tiles, programs):
    """(tile, k0, k1) of each work item of program pid, from the kernel's _work and _item."""
    n_dp, n, s, e, u0 = W._work.fn(pid, tiles, sk, k_tiles, programs)
    return [W._item.fn(j, pid, n_dp, s, e, u0, k_tiles, programs) for j in range(n)]


@pytest.mark.parametrize("tiles,k_tiles", [(224, 148), (1792, 32), (1536, 32), (1024, 112), (4096, 64), (112, 148),
                                           (133, 5), (265, 9)])
def test_stream_k_split_covers_every_k_tile_once_and_finishers_wait_on_the_right_programs(tiles, k_tiles):
    """The kernel's work split over 132 programs (as the host launches it: stream_k_tiles picks
    SK_TILES, every program when there are any): every (tile, k tile) exactly once; a program
    hands over at most one partial (its first stream-K piece); a head short of K is its
    program's last item, and the programs it waits on (_finisher_end) are exactly the later
    owners of that tile, each of whose first stream-K piece is in it."""
    P = 132
    sk = W.stream_k_tiles(tiles, P, k_tiles)
    progs = P if sk else min(P, tiles)
    n_dp, t2 = tiles - sk, sk * k_tiles
    items = {p: work(p, tiles, sk, k_tiles, progs) for p in range(progs)}
    owner = {}
    for p, its in items.items():
        for t, k0, k1 in its:
            for kk in range(k0, k1):
                assert (t, kk) not in owner
                owner[(t, kk)] = p
    assert len(owner) == tiles * k_tiles
    for p, its in items.items():
        assert sum(k0 > 0 for _, k0, _ in its) <= 1
        for idx, (t, k0, k1) in enumerate(its):
            end = W._finisher_end.fn(t, k1, n_dp, k_tiles, p, progs, t2)
            later = sorted({owner[(t, kk)] for kk in range(k1, k_tiles)})
            assert later == list(range(p + 1, end)) or k0 > 0  # a partial's program waits on nobody
            if k0 == 0 and k1 < k_tiles:
                assert idx == len(its) - 1 and later
                for q in later:
                    first_sk = next(i for i in items[q] if i[0] >= n_dp)
                    assert first_sk[0] == t and first_sk[1] > 0
    load = [sum(k1 - k0 for _, k0, k1 in its) for its in items.values()]
    if sk:  # balanced to one k tile, below the data-parallel makespan
        assert max(load) - min(load) <= 1 and max(load) < -(-tiles // P) * k_tiles


def test_stream_k_only_for_a_partial_wave_worth_splitting():
    assert W.stream_k_tiles(224, 132, 148) == 92  # qwen7b-down-m1024: 92 tiles over 132 programs
    assert W.stream_k_tiles(4096, 132, 64) == 0  # 8192^3: 4 tiles x 64 k tiles, under 4 a program
    assert W.stream_k_tiles(264, 132, 148) == 0 and W.stream_k_tiles(112, 132, 148) == 0  # whole waves / one
    assert W.stream_k_tiles(224, 132, 148, streamk=False) == 0
