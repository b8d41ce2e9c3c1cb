#!/usr/bin/env python3
"""The gradients of the published models that cluster/published.py predicts, in backward's order
(the order PyTorch DDP and comm/buckets.c fill buckets: the reverse of declaration), each with its
elements and the share of a step's backward that has passed when backward completes it.
The shares come from each layer's multiply-adds (its backward costs twice its forward); the
element-wise layers (norms, activations) are left out of the cost. Parameters shared by two
layers (tied embeddings) are complete when the earlier layer's backward is.
"""


def _walk(layers):
    """layers: (params [(name, elements)], cost) in forward order -> [(name, elements, share)] in
    backward order."""
    total = float(sum(c for _, c in layers)) or 1.0
    out, done = [], 0.0
    for params, cost in reversed(layers):
        done += cost
        out += [(name, n, done / total) for name, n in reversed(params)]
    return out


def resnet50(classes=1000, size=224):
    """torchvision's ResNet-50 v1.5 (stride in the 3x3 convolution): 25,557,032 parameters."""
    layers, hw = [], size // 2
    conv = lambda name, k, cin, cout, out_hw: ([(name + ".weight", k * k * cin * cout)],
                                               k * k * cin * cout * out_hw * out_hw)
    bn = lambda name, c: ([(name + ".weight", c), (name + ".bias", c)], 0)
    layers += [conv("conv1", 7, 3, 64, hw), bn("bn1", 64)]
    hw //= 2  # max pool
    cin = 64
    for li, (planes, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
        for b in range(blocks):
            s = stride if b == 0 else 1
            p = f"layer{li + 1}.{b}"
            out = hw // s
            layers += [conv(p + ".conv1", 1, cin, planes, hw), bn(p + ".bn1", planes),
                       conv(p + ".conv2", 3, planes, planes, out), bn(p + ".bn2", planes),
                       conv(p + ".conv3", 1, planes, planes * 4, out), bn(p + ".bn3", planes * 4)]
            if b == 0:
                layers += [conv(p + ".downsample.0", 1, cin, planes * 4, out),
                           bn(p + ".downsample.1", planes * 4)]
            cin, hw = planes * 4, out
    layers.append(([("fc.weight", 2048 * classes), ("fc.bias", classes)], 2048 * classes))
    return _walk(layers)


def bert(layers=24, hidden=1024, ffn=4096, vocab=30528, positions=512, seq=128):
    """BERT pre-training (NVIDIA DeepLearningExamples' PyTorch BERT: the vocabulary padded to a
    multiple of 8, the MLM head's decoder tied to the word embeddings, the NSP head): BERT-large
    is 336,232,258 parameters by this count."""
    h = hidden
    lin = lambda name, i, o: [(name + ".weight", i * o), (name + ".bias", o)]
    ln = lambda name: [(name + ".weight", h), (name + ".bias", h)]
    emb = [("embeddings.word_embeddings.weight", vocab * h),
           ("embeddings.position_embeddings.weight", positions * h),
           ("embeddings.token_type_embeddings.weight", 2 * h)] + ln("embeddings.LayerNorm")
    out = [(emb, 0)]
    for i in range(layers):
        p = f"encoder.layer.{i}"
        params = lin(p + ".attention.self.query", h, h) + lin(p + ".attention.self.key", h, h) + \
            lin(p + ".attention.self.value", h, h) + lin(p + ".attention.output.dense", h, h) + \
            ln(p + ".attention.output.LayerNorm") + lin(p + ".intermediate.dense", h, ffn) + \
            lin(p + ".output.dense", ffn, h) + ln(p + ".output.LayerNorm")
        out.append((params, seq * (4 * h * h + 2 * h * ffn) + 2 * seq * seq * h))
    head = lin("pooler.dense", h, h) + lin("cls.predictions.transform.dense", h, h) + \
        ln("cls.predictions.transform.LayerNorm") + [("cls.predictions.bias", vocab)] + \
        lin("cls.seq_relationship", h, 2)
    out.append((head, seq * (h * h + h * vocab)))
    return _walk(out)


def transformer_xl(layers=18, d=1024, ffn=4096, heads=16, head_dim=64, tgt=384, mem=384,
                   cutoffs=(19997, 39997, 199997), tokens=267735, div=4):
    """NVIDIA DeepLearningExamples' Transformer-XL (MemTransformerLM, relative position
    attention, adaptive embedding and softmax with div_val 4 and tied weights); the large
    WT103 configuration is 285,167,482 parameters by this count (the Transformer-XL paper gives
    257M; the README none)."""
    ends = [0, *cutoffs, tokens]
    embp = []
    for i in range(len(ends) - 1):
        e = d // div**i
        embp += [(f"word_emb.emb_layers.{i}.weight", (ends[i + 1] - ends[i]) * e),
                 (f"word_emb.emb_projs.{i}", d * e)]
    hd = heads * head_dim
    out = [(embp + [("r_w_bias", hd), ("r_r_bias", hd)], 0)]  # used by every layer
    for i in range(layers):
        p = f"layers.{i}"
        params = [(p + ".dec_attn.qkv_net.weight", 3 * d * hd), (p + ".dec_attn.o_net.weight", hd * d),
                  (p + ".dec_attn.layer_norm.weight", d), (p + ".dec_attn.layer_norm.bias", d),
                  (p + ".dec_attn.r_net.weight", d * hd),
                  (p + ".pos_ff.CoreNet.0.weight", d * ffn), (p + ".pos_ff.CoreNet.0.bias", ffn),
                  (p + ".pos_ff.CoreNet.3.weight", ffn * d), (p + ".pos_ff.CoreNet.3.bias", d),
                  (p + ".pos_ff.layer_norm.weight", d), (p + ".pos_ff.layer_norm.bias", d)]
        cost = tgt * (4 * d * hd + 2 * d * ffn) + (tgt + mem) * d * hd + 2 * tgt * (tgt + mem) * hd
        out.append((params, cost))
    crit = [("crit.out_projs.0", d * d),
            ("crit.cluster_weight", len(cutoffs) * d), ("crit.cluster_bias", len(cutoffs))] + \
        [(f"crit.out_layers.{i}.bias", ends[i + 1] - ends[i]) for i in range(len(ends) - 1)]
    out.append((crit, tgt * d * (cutoffs[0] + len(cutoffs))))
    return _walk(out)


if __name__ == "__main__":  # a module of cluster/predict.py and cluster/published.py: its description
    print(__doc__.strip())
