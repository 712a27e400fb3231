#!/usr/bin/env python3
"""The models users bring: export real networks with torch, run them with tessera, onnxruntime
and (when installed) OpenVINO, and compare.

One model of each torchvision classification family, two segmentation networks, the AutoTVM
paper's DCGAN generator and LSTM language model, a BERT-base-sized encoder at sequence 128, a
GPT-style causal decoder, and five models of Hugging Face's transformers (DistilBERT, RoBERTa,
GPT-2, T5-small's encoder, Whisper-tiny's encoder, from their configurations), each exported
with both of torch's exporters (`dynamo=False`, the TorchScript one, and `dynamo=True`, the
default), random weights, batch 1. For each export: does tessera import it (and if not, its
one-line reason), its largest relative error against onnxruntime, and the median time of each
runtime over alternating rounds.

Needs torch and torchvision (large: not part of CI), transformers for its five; onnx,
onnxruntime and numpy; openvino is optional, and runs in float32 as the others do (its own
default on CPUs with AMX or AVX-512 BF16 is bfloat16), its error against onnxruntime reported
beside tessera's. Example:

    python3 bench/zoo.py --tessera build/tessera --out docs/bench/zoo --threads 2 --rounds 5
    python3 bench/zoo.py --tessera build/tessera --models resnet18 vit_b_16 --survey
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time

import numpy as np


def classification(name):
    def make():
        import torchvision

        return getattr(torchvision.models, name)(weights=None).eval(), (1, 3, 224, 224)

    return make


def segmentation(name):
    """A torchvision segmentation network (its decoder upsamples with bilinear Resize) at
    224x224; the output is the "out" map of its result."""

    def make():
        import torch.nn as nn
        import torchvision

        class Out(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = getattr(torchvision.models.segmentation, name)(
                    weights=None, weights_backbone=None)

            def forward(self, x):
                return self.net(x)["out"]

        return Out().eval(), (1, 3, 224, 224)

    return make


def dcgan_generator():
    """The DCGAN generator of the AutoTVM paper's end-to-end set (nz 100, ngf 64, 64x64 RGB)."""
    import torch.nn as nn

    nz, ngf = 100, 64

    def up(c_in, c_out, first=False):
        return [nn.ConvTranspose2d(c_in, c_out, 4, 1 if first else 2, 0 if first else 1,
                                   bias=False), nn.BatchNorm2d(c_out), nn.ReLU(True)]

    net = nn.Sequential(*up(nz, ngf * 8, True), *up(ngf * 8, ngf * 4), *up(ngf * 4, ngf * 2),
                        *up(ngf * 2, ngf), nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False),
                        nn.Tanh())
    return net.eval(), (1, nz, 1, 1)


def bert_encoder():
    """BERT-base's encoder stack (12 layers, 768 wide, 12 heads, GELU) on embeddings of 128
    tokens; the token embedding lookup stays outside (it needs integer inputs)."""
    import torch.nn as nn

    layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu",
                                       batch_first=True)
    return nn.TransformerEncoder(layer, 12, enable_nested_tensor=False).eval(), (1, 128, 768)


def inception_v3():
    """Inception-v3 at its own 299x299 (asymmetric 1x7 and 7x1 convolutions)."""
    import torchvision

    net = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=True)
    return net.eval(), (1, 3, 299, 299)


def gpt_decoder():
    """A GPT-style causal language model: token and position embeddings, 6 pre-norm layers of
    512 (8 heads, GELU) under a causal mask, a head over a 10000-word vocabulary, 128 tokens."""
    import torch
    import torch.nn as nn

    vocab, dim, seq = 10000, 512, 128

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(vocab, dim)
            self.positions = nn.Parameter(torch.randn(1, seq, dim) * 0.02)
            layer = nn.TransformerEncoderLayer(dim, 8, 4 * dim, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.layers = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab, bias=False)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq))

        def forward(self, ids):
            x = self.layers(self.tokens(ids) + self.positions, mask=self.mask, is_causal=True)
            return self.head(self.norm(x))

    return GPT().eval(), ((1, seq), torch.int64)


def transformers_model(config, model, shape, **settings):
    """A model of Hugging Face's transformers package from its configuration (random weights,
    nothing downloaded): its last hidden state. `shape` as the others' specs."""

    def make():
        import torch.nn as nn
        import transformers

        net = getattr(transformers, model)(getattr(transformers, config)(**settings))
        body = net.get_encoder() if model == "WhisperModel" else net

        class Hidden(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = body.eval()

            def forward(self, x):
                return self.net(x).last_hidden_state

        return Hidden().eval(), shape

    return make


def lstm_lm():
    """The AutoTVM paper's LSTM language model: embedding, two LSTM layers of 650, a decoder
    over a 10000-word vocabulary, 35 tokens."""
    import torch
    import torch.nn as nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10000, 650)
            self.lstm = nn.LSTM(650, 650, 2, batch_first=True)
            self.decode = nn.Linear(650, 10000)

        def forward(self, tokens):
            out, _ = self.lstm(self.embed(tokens))
            return self.decode(out)

    return LM().eval(), ((1, 35), torch.int64)


MODELS = {
    "resnet18": classification("resnet18"),
    "resnet50": classification("resnet50"),
    "mobilenet_v2": classification("mobilenet_v2"),
    "mobilenet_v3_small": classification("mobilenet_v3_small"),
    "efficientnet_b0": classification("efficientnet_b0"),
    "densenet121": classification("densenet121"),
    "squeezenet1_1": classification("squeezenet1_1"),
    "googlenet": classification("googlenet"),
    "shufflenet_v2_x1_0": classification("shufflenet_v2_x1_0"),
    "vgg11": classification("vgg11"),
    "regnet_y_400mf": classification("regnet_y_400mf"),
    "mnasnet1_0": classification("mnasnet1_0"),
    "convnext_tiny": classification("convnext_tiny"),
    "vit_b_16": classification("vit_b_16"),
    "swin_t": classification("swin_t"),
    "inception_v3": inception_v3,
    "alexnet": classification("alexnet"),
    "lraspp_mobilenet_v3_large": segmentation("lraspp_mobilenet_v3_large"),
    "deeplabv3_mobilenet_v3_large": segmentation("deeplabv3_mobilenet_v3_large"),
    "dcgan_generator": dcgan_generator,
    "bert_base_encoder": bert_encoder,
    "lstm_lm": lstm_lm,
    "gpt_decoder": gpt_decoder,
    "maxvit_t": classification("maxvit_t"),
    "swin_v2_t": classification("swin_v2_t"),
    # transformers' own models, base configurations, 128 tokens.
    "distilbert_base": transformers_model("DistilBertConfig", "DistilBertModel",
                                          ((1, 128), "int64")),
    "roberta_base": transformers_model("RobertaConfig", "RobertaModel", ((1, 128), "int64")),
    "gpt2_small": transformers_model("GPT2Config", "GPT2Model", ((1, 128), "int64")),
    "t5_small_encoder": transformers_model("T5Config", "T5EncoderModel", ((1, 128), "int64")),
    # Whisper-tiny's encoder on 30 s of 80 log-mel bins.
    "whisper_tiny_encoder": transformers_model(
        "WhisperConfig", "WhisperModel", (1, 80, 3000), d_model=384, encoder_layers=4,
        encoder_attention_heads=6, encoder_ffn_dim=1536, decoder_layers=4,
        decoder_attention_heads=6, decoder_ffn_dim=1536),
}


def export(name, exporter, path):
    import torch

    torch.manual_seed(0)
    model, spec = MODELS[name]()
    # Some families start a layer at zero (ViT's head): an all-zero output would match anything.
    with torch.no_grad():
        for p in model.parameters():
            if p.abs().max() == 0:
                p.normal_(0, 0.02)
    # The legacy exporter cannot write the fused attention of the eval fast path.
    torch.backends.mha.set_fastpath_enabled(False)
    shape, dtype = spec if isinstance(spec[0], tuple) else (spec, torch.float32)
    dtype = torch.int64 if dtype == "int64" else dtype
    x = (torch.randint(0, 10000, shape) if dtype == torch.int64 else torch.rand(shape))
    with torch.no_grad():
        if exporter == "legacy":
            torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17,
                              input_names=["input"], output_names=["output"])
        else:
            torch.onnx.export(model, (x,), path, dynamo=True, input_names=["input"],
                              output_names=["output"])
    return x.numpy()


def ort_session(path, threads):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def openvino_model(path, threads):
    try:
        import openvino as ov
    except ImportError:
        return None
    core = ov.Core()
    # float32 as tessera and onnxruntime compute: on CPUs with AMX or AVX-512 BF16 OpenVINO
    # otherwise infers in bfloat16 (BERT 24 ms against 92 in float32 on a Xeon with AMX).
    return core.compile_model(core.read_model(path), "CPU",
                              {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                               "INFERENCE_PRECISION_HINT": "f32"})


def timed(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def relative_error(got, expected):
    return float(np.max(np.abs(got - expected)) / max(float(np.max(np.abs(expected))), 1e-30))


def run_tessera(args, path, in_path, out_path, repeat):
    """tessera run-model on the model, its report (or the error line)."""
    cmd = [args.tessera, "run-model", path, "--threads", str(args.threads), "--repeat",
           str(repeat), "--json", "--input", in_path, "--output", out_path]
    if args.db and not path.endswith(".so"):
        cmd += ["--db", args.db]
    if args.fixed_threads:
        cmd += ["--fixed-threads"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        return None, run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "exit %d" % (
            run.returncode)
    return json.loads(run.stdout), ""


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", required=True)
    p.add_argument("--models", nargs="*", default=list(MODELS))
    p.add_argument("--exporters", nargs="*", default=["legacy", "dynamo"])
    p.add_argument("--workdir", default="/tmp/tessera-zoo")
    p.add_argument("--out", help="write OUT.md and OUT.csv")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeat", type=int, default=10, help="runs per round")
    p.add_argument("--db", help="records DB for tessera's tuned kernels")
    p.add_argument("--pause", type=float, default=1.0,
                   help="seconds of idle before each runtime's turn in a round, for the others' spinning "
                        "threads to stop")
    p.add_argument("--fixed-threads", action="store_true",
                   help="tessera's library runs on --threads always (by default it tries fewer where the "
                        "machine is busy)")
    p.add_argument("--survey", action="store_true",
                   help="import and check only, no timing rounds")
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "?")
    isa = "AVX-512" if "avx512f" in open("/proc/cpuinfo").read() else "AVX2"
    print(f"# {cpu}, {isa}, {args.threads} threads, batch 1")
    rows = []
    for name in args.models:
        for exporter in args.exporters:
            path = os.path.join(args.workdir, f"{name}.{exporter}.onnx")
            in_path = path + ".in.npy"
            out_path = path + ".out.npy"
            row = {"model": name, "exporter": exporter}
            try:
                if not os.path.exists(path) or not os.path.exists(in_path):
                    np.save(in_path, export(name, exporter, path))
            except Exception as e:  # an export failure is torch's, not tessera's
                row["status"] = "export failed: " + str(e).splitlines()[0][:120]
                rows.append(row)
                print(row, flush=True)
                continue
            x = np.load(in_path)
            sess = ort_session(path, args.threads)
            feed = {sess.get_inputs()[0].name: x}
            expected = sess.run(None, feed)[0]
            report, error = run_tessera(args, path, in_path, out_path, 1)
            if report is None:
                row["status"] = "refused: " + error
                rows.append(row)
                print(row, flush=True)
                continue
            got = np.load(out_path)
            row["error"] = relative_error(got, expected) if got.shape == expected.shape else "shape"
            row["status"] = "ok"
            if not args.survey:
                # Timed as an application runs it: the library `tessera compile -o` writes.
                lib = path + ".so"
                cmd = [args.tessera, "compile", path, "--trials", "0", "-o", lib, "--threads",
                       str(args.threads)] + (["--db", args.db] if args.db else [])
                built = subprocess.run(cmd, capture_output=True, text=True)
                if built.returncode != 0:
                    row["status"] = "compile failed: " + built.stderr.strip()[-200:]
                    rows.append(row)
                    print(row, flush=True)
                    continue
                ov = openvino_model(path, args.threads)
                if ov is not None:
                    row["openvino_error"] = relative_error(ov([x])[0], expected)
                t_ms, o_ms, v_ms = [], [], []
                for _ in range(args.rounds):  # alternating rounds
                    # Each runtime starts on a quiet machine: onnxruntime's and OpenVINO's pools
                    # spin on after their last run, which took both cores from the first runs of
                    # tessera's process (DenseNet-121: 27 ms against 19 with a pause).
                    time.sleep(args.pause)
                    rep, _ = run_tessera(args, lib, in_path, out_path, args.repeat)
                    t_ms.append(rep["ms_median"] if rep else float("nan"))
                    time.sleep(args.pause)
                    o_ms.append(timed(lambda: sess.run(None, feed), args.repeat))
                    if ov is not None:
                        time.sleep(args.pause)
                        v_ms.append(timed(lambda: ov([x]), args.repeat))
                row["tessera_ms"] = float(np.median(t_ms))
                row["ort_ms"] = float(np.median(o_ms))
                row["ort_ratio"] = row["ort_ms"] / row["tessera_ms"]
                if v_ms:
                    row["openvino_ms"] = float(np.median(v_ms))
                    row["openvino_ratio"] = row["openvino_ms"] / row["tessera_ms"]
            rows.append(row)
            print(row, flush=True)

    if args.out:
        keys = ["model", "exporter", "status", "error", "tessera_ms", "ort_ms", "ort_ratio",
                "openvino_ms", "openvino_ratio", "openvino_error"]
        with open(args.out + ".csv", "w", newline="") as f:
            w = csv.DictWriter(f, keys)
            w.writeheader()
            w.writerows(rows)
        with open(args.out + ".md", "w") as f:
            how = ("survey: imported and checked against onnxruntime, not timed" if args.survey
                   else f"medians of {args.rounds} alternating rounds")
            f.write(f"{cpu}, {isa}, {args.threads} threads, batch 1, {how}\n\n| " + " | ".join(keys) + " |\n|" + "---|" * len(keys)
                    + "\n")
            for r in rows:
                f.write("| " + " | ".join(
                    f"{r[k]:.3g}" if isinstance(r.get(k), float) else str(r.get(k, ""))
                    for k in keys) + " |\n")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
