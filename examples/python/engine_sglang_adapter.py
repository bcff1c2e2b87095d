"""An engine-style batch loop with SGLang's tree verification interface, served by specdec.

Each step, for every request: the draft model grows an EAGLE-style tree (its top-k tokens at the
root, then the top-k after each of them), the target scores the context and the whole tree in
one pass with a tree attention mask, and the tensors go to the verifier in SGLang's layout
(candidates, retrive_index / retrive_next_token / retrive_next_sibling, target_probs and the
uniform samples, written into predicts / accept_index / accept_token_num). The only line that
names specdec is the import: an engine built on sgl-kernel swaps it there. At temperature 0 the
loop calls verify_tree_greedy with the target's argmaxes and checks the result against the
target's own greedy decoding.

    python3 examples/python/engine_sglang_adapter.py --requests 4 --topk 2 --tokens 32
"""

import argparse

import torch

from engine_requests import Requests, parse_arguments  # beside this script
from model import GPT, Config
from specdec.compat.sglang import tree_speculative_sampling_target_only, verify_tree_greedy


def last_logits(model, tokens):
    """Logits after `tokens`, [V] (a plain causal pass: the draft side of the toy)."""
    mask = torch.tril(torch.ones(len(tokens), len(tokens), dtype=torch.bool))
    with torch.no_grad():
        return model.forward(tokens, list(range(len(tokens))), mask,
                             model.new_cache(len(tokens)))[-1].float()


def eagle_tree(model, context, topk):
    """A depth-2 tree in SGLang's layout: slot 0 the root (the last context token), slots
    1..topk its children, then topk children of each, in breadth-first order. Returns
    (tokens per slot, parent slot per slot)."""
    tokens, parents = [context[-1]], [-1]
    for child in torch.topk(last_logits(model, context), topk).indices.tolist():
        tokens.append(child)
        parents.append(0)
    for slot in range(1, topk + 1):
        for grandchild in torch.topk(last_logits(model, context + [tokens[slot]]), topk).indices:
            tokens.append(int(grandchild))
            parents.append(slot)
    return tokens, parents


def tree_logits(model, context, tokens, parents):
    """The target's logits after the root and after every slot, [slots, V], from one pass over
    the context and the tree's nodes with a tree attention mask."""
    c, nodes = len(context), len(tokens) - 1
    depth = [0] * len(tokens)
    for s in range(1, len(tokens)):
        depth[s] = depth[parents[s]] + 1
    mask = torch.zeros(c + nodes, c + nodes, dtype=torch.bool)
    mask[:c, :c] = torch.tril(torch.ones(c, c, dtype=torch.bool))
    for s in range(1, len(tokens)):
        row = c + s - 1
        mask[row, :c] = True
        a = s
        while a > 0:  # the node and its ancestors
            mask[row, c + a - 1] = True
            a = parents[a]
    positions = list(range(c)) + [c - 1 + depth[s] for s in range(1, len(tokens))]
    with torch.no_grad():
        logits = model.forward(context + tokens[1:], positions, mask, model.new_cache(c + nodes))
    return logits[c - 1:].float()


def links(parents):
    """retrive_next_token and retrive_next_sibling of one tree (children in slot order)."""
    first, sibling = [-1] * len(parents), [-1] * len(parents)
    for s in reversed(range(1, len(parents))):
        sibling[s] = first[parents[s]]
        first[parents[s]] = s
    return first, sibling


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topk", type=int, default=2, help="children per node of the tree")
    args = parse_arguments(parser, quick_tokens=8)

    target_model = GPT(Config(layers=4, seed=args.seed))
    draft_model = target_model.early_exit(1)
    requests = Requests(args.requests, args.tokens)
    contexts = requests.contexts
    while active := requests.active():
        trees = [eagle_tree(draft_model, contexts[r], args.topk) for r in active]
        slots = len(trees[0][0])
        bs = len(active)
        candidates = torch.tensor([t for t, _ in trees], dtype=torch.int64)
        retrive_index = torch.arange(bs * slots, dtype=torch.int64).reshape(bs, slots)
        next_token, next_sibling = zip(*(links(p) for _, p in trees))
        retrive_next_token = torch.tensor(next_token, dtype=torch.int64)
        retrive_next_sibling = torch.tensor(next_sibling, dtype=torch.int64)
        logits = torch.stack([tree_logits(target_model, contexts[r], t, p)
                              for r, (t, p) in zip(active, trees)])
        predicts = torch.full((bs * slots,), -1, dtype=torch.int32)
        accept_index = torch.full((bs, 3), -1, dtype=torch.int32)  # root + depth 2
        accept_token_num = torch.zeros(bs, dtype=torch.int32)
        if args.temperature == 0:
            verify_tree_greedy(predicts, accept_index, accept_token_num, candidates,
                               retrive_index, retrive_next_token, retrive_next_sibling,
                               torch.argmax(logits, dim=-1))
        else:
            target_probs = torch.softmax(logits / args.temperature, dim=-1)
            tree_speculative_sampling_target_only(
                predicts, accept_index, accept_token_num, candidates, retrive_index,
                retrive_next_token, retrive_next_sibling, torch.rand(bs, slots),
                torch.rand(bs), target_probs, torch.zeros_like(target_probs), 1.0, 1.0, True)
        accepted = [[int(predicts[int(accept_index[b, j])]) for j in range(int(n) + 1)]
                    for b, n in enumerate(accept_token_num)]
        kept = requests.append(active, accepted)
        if requests.steps <= 3:
            print(f"step {requests.steps}: {[len(t) for t in kept]} tokens per request")
    requests.finish(target_model, f"top-{args.topk} tree of depth 2", args.temperature)


if __name__ == "__main__":
    main()
