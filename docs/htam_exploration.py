"""The simulation behind docs/architecture.md, "HTAM", "Settled on evidence": HTAM's
direction choice alone (mu_b with the seed's priors and k0 = 2, the exploration bonus
c*sqrt(ln(N+1)/(n_b+1)), softmax at tau or argmax) on 7 directions whose rewards are
Gaussian around true means. Prints the mean reward per step for c = 0, 0.1, 0.3.
Run: python3 docs/htam_exploration.py (about a minute)."""
import math
import random
import statistics

PRIORS = [0.25, 0.15, 0.2, 0.2, 0.15, 0.08, 0.05]  # schema/seed_memory.json, in order
TRUE = {
    "as in the first run": [0.05, -0.10, 0.15, 0.10, 0.00, -0.20, -0.25],
    "ranked like the priors": [0.20, 0.10, 0.15, 0.15, 0.10, 0.0, -0.05],
    "ranked against the priors": [-0.2, -0.1, 0.0, 0.05, 0.1, 0.2, 0.25],
}


def run(c, tau, steps, seed, means, spread, switch_to=None, argmax=False):
    rnd = random.Random(seed)
    n, total, got = [0] * 7, [0.0] * 7, 0.0
    for t in range(steps):
        true = switch_to if switch_to and t >= steps // 2 else means
        N = sum(n)
        score = [(total[b] + 2 * PRIORS[b]) / (n[b] + 2) +
                 c * math.sqrt(math.log(N + 1) / (n[b] + 1)) for b in range(7)]
        if argmax:
            b = max(range(7), key=lambda i: score[i])
        else:
            top = max(score)
            w = [math.exp((x - top) / tau) for x in score]
            u, acc, b = rnd.random() * sum(w), 0.0, 6
            for i in range(7):
                acc += w[i]
                if u < acc:
                    b = i
                    break
        r = rnd.gauss(true[b], spread)
        n[b] += 1
        total[b] += r
        got += r
    return got / steps


def mean_reward(c, means, spread, switch_to=None, runs=2000):
    return statistics.mean(run(c, 0.1, 200, s, means, spread, switch_to) for s in range(runs))


if __name__ == "__main__":
    for name, means in TRUE.items():
        for spread in (0.1, 0.25, 0.5):
            row = ["c=%.1f: %.4f" % (c, mean_reward(c, means, spread)) for c in (0, 0.1, 0.3)]
            print("%-26s spread %.2f  %s" % (name, spread, "  ".join(row)))
    switch = [mean_reward(c, TRUE["as in the first run"], 0.25,
                          TRUE["ranked against the priors"]) for c in (0, 0.1, 0.3)]
    print("switching halfway           spread 0.25  %s" %
          "  ".join("c=%.1f: %.4f" % (c, v) for c, v in zip((0, 0.1, 0.3), switch)))
