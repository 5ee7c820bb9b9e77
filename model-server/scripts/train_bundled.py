#!/usr/bin/env python3
"""Trains dispatch's bundled model: a small Qwen3-MoE on WordNet glosses as chat.

    python3 train_bundled.py --wordnet /usr/share/wordnet --out ../models/tiny-wordnet-moe --golden-out ../fixtures/bundled --minutes 2.2

Steps (all on one machine with PyTorch + tokenizers + transformers; a GPU makes
training take minutes):
  1. WordNet 3.0 glosses -> ChatML conversations (wordnet_chat.py).
  2. A byte-level BPE tokenizer trained on that text (`tokenizers`), special
     tokens <|endoftext|>, <|im_start|>, <|im_end|> appended after the merges
     so token ids equal BPE ranks (what tiktoken needs).
  3. A transformers Qwen3MoeForCausalLM from config (8 experts, top-2), trained
     with AdamW under bf16 autocast for a fixed wall-clock budget; the weights
     with the best held-out loss (checked every 250 steps) are kept.
  4. Saved in Hugging Face layout (bf16 safetensors, config.json,
     tokenizer.json, tokenizer_config.json with the chat template), plus
     train_log.json (losses), samples.txt, and golden files for the CPU
     backend test (fp32 logits of two chat prompts with the saved bf16 weights,
     eager attention; the sdpa-vs-eager gap is printed) and tokenizer cases.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wordnet_chat import CHAT_TEMPLATE, conversations  # noqa: E402

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB = 4096
QUESTIONS = [
    'What does "river" mean?',
    "What is a telescope?",
    "Define the verb whisper.",
    "What does it mean to borrow?",
    "Tell me what music is.",
    'What does "brave" mean?',
]
TOKENIZER_CASES = [
    "Hello, world! It's 2026 and we've 3.14 reasons.",
    "  leading spaces\tand\ttabs\n\nnew lines   ",
    "naïve café — déjà vu 東京 🙂",
    "<|im_start|>user\nWhat is a dog?<|im_end|>\n<|im_start|>assistant\n",
    "don't DON'T they'll I'm you're we've she'd",
]


def train_tokenizer(texts, out_dir):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB - len(SPECIALS),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
    )
    plain = (t.replace("<|im_start|>", "").replace("<|im_end|>", "") for t in texts)
    tok.train_from_iterator(plain, trainer)
    tok.add_special_tokens(SPECIALS)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": None,
                "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>",
                "unk_token": None,
                "model_max_length": 1024,
                "chat_template": CHAT_TEMPLATE,
                "added_tokens_decoder": {
                    str(tok.token_to_id(s)): {"content": s, "special": True} for s in SPECIALS
                },
            },
            f,
            indent=1,
        )
    return tok


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wordnet", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--golden-out", required=True)
    ap.add_argument("--minutes", type=float, default=4.0)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=96)
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    t_start = time.time()
    torch.manual_seed(0)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.golden_out, exist_ok=True)

    convs = conversations(args.wordnet, seed=0)
    tok = train_tokenizer(convs, args.out)
    ids_per_conv = [e.ids for e in tok.encode_batch(convs)]
    n_val = len(convs) // 50
    flat_train = [i for ids in ids_per_conv[n_val:] for i in ids]
    flat_val = [i for ids in ids_per_conv[:n_val] for i in ids]
    print(f"[train] {len(convs)} conversations, {len(flat_train)} train tokens, {len(flat_val)} val tokens, vocab {tok.get_vocab_size()} ({time.time() - t_start:.0f}s)", flush=True)
    with open(os.path.join(args.golden_out, "tokenizer-cases.json"), "w") as f:
        json.dump([{"text": t, "ids": tok.encode(t).ids} for t in TOKENIZER_CASES], f, indent=1, ensure_ascii=False)

    im_end = tok.token_to_id("<|im_end|>")
    config = AutoConfig.for_model(
        "qwen3_moe",
        vocab_size=tok.get_vocab_size(),
        hidden_size=256,
        intermediate_size=512,
        moe_intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        num_experts=8,
        num_experts_per_tok=2,
        norm_topk_prob=True,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        max_position_embeddings=1024,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        output_router_logits=True,
        router_aux_loss_coef=0.01,
        bos_token_id=None,
        eos_token_id=im_end,
        pad_token_id=tok.token_to_id("<|endoftext|>"),
    )
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    model.lm_head.weight = model.model.embed_tokens.weight  # tied, whatever from_config did
    model = model.to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"[train] {type(model).__name__} {n_params / 1e6:.2f}M params on {dev}", flush=True)

    train = torch.tensor(flat_train, dtype=torch.long, device=dev)
    val = torch.tensor(flat_val, dtype=torch.long, device=dev)
    span = torch.arange(args.seq, device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)

    def batch(data, gen=None):
        offs = torch.randint(0, data.numel() - args.seq - 1, (args.batch,), device=dev, generator=gen)
        return data[offs[:, None] + span]

    @torch.no_grad()
    def val_loss():
        model.eval()
        gen = torch.Generator(device=dev).manual_seed(1)
        total = 0.0
        for _ in range(8):
            x = batch(val, gen)
            with torch.autocast(dev, dtype=torch.bfloat16):
                out = model(input_ids=x, labels=x, output_router_logits=False)
            total += float(out.loss)
        model.train()
        return total / 8

    budget = args.minutes * 60
    t0 = time.time()
    step, log = 0, []
    best = (float("inf"), 0, None)
    model.train()
    while True:
        elapsed = time.time() - t0
        if elapsed >= budget:
            break
        frac = elapsed / budget
        lr = args.lr * min(1.0, (step + 1) / 150) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        x = batch(train)
        with torch.autocast(dev, dtype=torch.bfloat16):
            out = model(input_ids=x, labels=x)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step % 250 == 0:
            entry = {"step": step, "seconds": round(time.time() - t0, 1), "lr": lr, "loss": out.loss.item(), "val_loss": val_loss()}
            if entry["val_loss"] < best[0]:
                # Keep the weights with the best held-out loss: the small corpus is seen many times.
                best = (entry["val_loss"], step, {k: v.detach().clone() for k, v in model.state_dict().items()})
            log.append(entry)
            print(f"[train] {entry}", flush=True)
    last_val = val_loss()
    if best[2] is not None and best[0] < last_val:
        model.load_state_dict(best[2])
    final_val = val_loss()
    best_step = best[1] if best[2] is not None and best[0] < last_val else step
    tokens_seen = step * args.batch * args.seq
    print(f"[train] done: {step} steps, {tokens_seen / 1e6:.1f}M tokens, kept step {best_step}, val loss {final_val:.3f}", flush=True)

    model.eval()
    model = model.to(torch.bfloat16)
    model.save_pretrained(args.out, safe_serialization=True)
    model = model.float().cpu()  # bf16-rounded weights, fp32 compute: what the CPU backend computes
    sdpa_model = model
    # The golden logits come from eager attention, as in make_golden.py.
    model = AutoModelForCausalLM.from_config(model.config, attn_implementation="eager")
    model.load_state_dict(sdpa_model.state_dict(), strict=False)
    model.lm_head.weight = model.model.embed_tokens.weight
    model = model.float().eval()

    def chat_ids(question):
        text = f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
        return tok.encode(text).ids

    @torch.no_grad()
    def greedy(ids, n):
        seq = list(ids)
        for _ in range(n):
            nxt = int(model(input_ids=torch.tensor([seq])).logits[0, -1].argmax())
            seq.append(nxt)
            if nxt == im_end:
                break
        return seq[len(ids):]

    from safetensors.torch import save_file

    cases, samples = [], []
    for i, q in enumerate(QUESTIONS):
        ids = chat_ids(q)
        cont = greedy(ids, 48)
        answer = tok.decode(cont, skip_special_tokens=False)
        samples.append(f"Q: {q}\nA: {answer}\n")
        if i < 2:
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids])).logits[0].float()
                sdpa = sdpa_model(input_ids=torch.tensor([ids])).logits[0].float()
            print(f"[train] golden {i}: max |eager - sdpa| = {float((logits - sdpa).abs().max()):.2e}", flush=True)
            cases.append({"prompt": ids, "greedy": cont[:32]})
            save_file({f"logits.{i}": logits.contiguous()}, os.path.join(args.golden_out, f"bundled-logits-{i}.safetensors"))
    with open(os.path.join(args.golden_out, "bundled-golden.json"), "w") as f:
        json.dump({"reference": f"transformers {transformers.__version__} Qwen3MoeForCausalLM (eager attention), bf16 weights in fp32", "cases": cases}, f, indent=1)
    with open(os.path.join(args.out, "samples.txt"), "w") as f:
        f.write("\n".join(samples))
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump(
            {
                "transformers": transformers.__version__,
                "torch": torch.__version__,
                "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
                "params": n_params,
                "conversations": len(convs),
                "train_tokens": len(flat_train),
                "val_tokens": len(flat_val),
                "steps": step,
                "kept_step": best_step,
                "batch": args.batch,
                "seq": args.seq,
                "peak_lr": args.lr,
                "train_seconds": round(time.time() - t0, 1),
                "tokens_seen": tokens_seen,
                "final_val_loss": final_val,
                "log": log,
            },
            f,
            indent=1,
        )
    print("\n".join(samples), flush=True)
    print(f"[train] total {time.time() - t_start:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
