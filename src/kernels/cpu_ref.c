// cpu_ref.c: the plain reference of the kernel ops (cpu_ref.h): each op's definition in
// kernels.h as scalar loops summed in double. Slow and obviously correct; for the tests only.
#include "cpu_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"

void ref_embedding_forward(float *out, const int *tokens, const float *wte, int N, int C) {
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = wte[(size_t)tokens[n] * C + c];
}

void ref_embedding_backward(float *dwte, const float *dout, const int *tokens, int N, int C) {
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) dwte[(size_t)tokens[n] * C + c] += dout[(size_t)n * C + c];
}

static double rms_rstd(const float *x, int C, float eps) {
    double ss = 0;
    for (int c = 0; c < C; c++) ss += (double)x[c] * x[c];
    return 1.0 / sqrt(ss / C + eps);
}

void ref_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N,
                         int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        double r = rms_rstd(x, C, eps);
        rstd[n] = (float)r;
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = (float)(x[c] * r * weight[c]);
    }
}

// y_c = x_c r w_c, r = (mean x^2 + eps)^(-1/2): dy_c/dx_j = w_c (r [c = j] - r^3 x_c x_j / C)
void ref_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                          const float *weight, int N, int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        double r = rms_rstd(x, C, eps), dot = 0;
        for (int c = 0; c < C; c++) dot += (double)dy[c] * weight[c] * x[c];
        for (int j = 0; j < C; j++) {
            dinp[(size_t)n * C + j] += (float)(dy[j] * weight[j] * r - r * r * r * x[j] * dot / C);
            dweight[j] += (float)((double)dy[j] * x[j] * r);
        }
    }
}

void ref_matmul_forward(float *out, const float *inp, const float *weight, int N, int C, int OC,
                        int add) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = add ? out[(size_t)n * OC + o] : 0.0;
            for (int c = 0; c < C; c++) s += (double)inp[(size_t)n * C + c] * weight[(size_t)o * C + c];
            out[(size_t)n * OC + o] = (float)s;
        }
}

void ref_matmul_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                         const float *weight, int N, int C, int OC) {
    for (int n = 0; n < N && dinp; n++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int o = 0; o < OC; o++) s += (double)dout[(size_t)n * OC + o] * weight[(size_t)o * C + c];
            dinp[(size_t)n * C + c] += (float)s;
        }
    for (int o = 0; o < OC && dweight; o++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int n = 0; n < N; n++) s += (double)dout[(size_t)n * OC + o] * inp[(size_t)n * C + c];
            dweight[(size_t)o * C + c] += (float)s;
        }
}

void ref_rope(float *x, const int *pos, int N, int NH, int hd, float theta, int sign) {
    int half = hd / 2;
    for (int n = 0; n < N; n++)
        for (int h = 0; h < NH; h++) {
            float *r = x + ((size_t)n * NH + h) * hd;
            for (int i = 0; i < half; i++) {
                double a = pos[n] * pow(theta, -2.0 * i / hd), c = cos(a), s = sign * sin(a);
                double x0 = r[i], x1 = r[i + half];
                r[i] = (float)(x0 * c - x1 * s);
                r[i + half] = (float)(x0 * s + x1 * c);
            }
        }
}

static int clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// the softmax of query row (b, t, h) over keys 0..t (p: t + 1 doubles)
static void att_probs(double *p, const float *q, const float *k, int b, int t, int h, int T, int NH,
                      int NKV, int hd) {
    int kh = h / (NH / NKV);
    const float *qr = q + (((size_t)b * T + t) * NH + h) * hd;
    double mx = -INFINITY, sum = 0;
    for (int s = 0; s <= t; s++) {
        const float *kr = k + (((size_t)b * T + s) * NKV + kh) * hd;
        double d = 0;
        for (int i = 0; i < hd; i++) d += (double)qr[i] * kr[i];
        p[s] = d / sqrt((double)hd);
        mx = p[s] > mx ? p[s] : mx;
    }
    for (int s = 0; s <= t; s++) sum += p[s] = exp(p[s] - mx);
    for (int s = 0; s <= t; s++) p[s] /= sum;
}

void ref_attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                           const int *lengths, int B, int T, int NH, int NKV, int hd) {
    double *p = xmalloc((size_t)T * sizeof(double));
    memset(out, 0, (size_t)B * T * NH * hd * sizeof(float));
    memset(att, 0, (size_t)B * NH * T * T * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < clamp(lengths[b], 0, T); t++) {
                att_probs(p, q, k, b, t, h, T, NH, NKV, hd);
                float *o = out + (((size_t)b * T + t) * NH + h) * hd;
                for (int i = 0; i < hd; i++) {
                    double s = 0;
                    for (int u = 0; u <= t; u++)
                        s += p[u] * v[(((size_t)b * T + u) * NKV + h / (NH / NKV)) * hd + i];
                    o[i] = (float)s;
                }
                for (int u = 0; u <= t; u++) att[(((size_t)b * NH + h) * T + t) * T + u] = (float)p[u];
            }
    free(p);
}

// out_t = sum_s p_ts v_s, p_t = softmax(S_t), S_ts = q_t . k_s / sqrt(hd):
// dv_s += p_ts dout_t; dp_ts = dout_t . v_s; dS_ts = p_ts (dp_ts - sum_u p_tu dp_tu);
// dq_t += sum_s dS_ts k_s / sqrt(hd); dk_s += dS_ts q_t / sqrt(hd)
void ref_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, const int *lengths, int B, int T,
                            int NH, int NKV, int hd) {
    double *p = xmalloc((size_t)T * sizeof(double)), *dp = xmalloc((size_t)T * sizeof(double));
    double scale = 1.0 / sqrt((double)hd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < clamp(lengths[b], 0, T); t++) {
                int kh = h / (NH / NKV);
                size_t qo = (((size_t)b * T + t) * NH + h) * hd;
                att_probs(p, q, k, b, t, h, T, NH, NKV, hd);
                double pdp = 0;
                for (int s = 0; s <= t; s++) {
                    size_t ko = (((size_t)b * T + s) * NKV + kh) * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += (double)dout[qo + i] * v[ko + i];
                    dp[s] = d;
                    pdp += p[s] * d;
                }
                for (int s = 0; s <= t; s++) {
                    size_t ko = (((size_t)b * T + s) * NKV + kh) * hd;
                    double ds = p[s] * (dp[s] - pdp) * scale;
                    for (int i = 0; i < hd; i++) {
                        if (dv) dv[ko + i] += (float)(p[s] * dout[qo + i]);
                        if (dq) dq[qo + i] += (float)(ds * k[ko + i]);
                        if (dk) dk[ko + i] += (float)(ds * q[qo + i]);
                    }
                }
            }
    free(p);
    free(dp);
}

void ref_attention_decode(float *out, const float *q, const float *kcache, const float *vcache,
                          const int *pos, int B, int Tmax, int NH, int NKV, int hd) {
    double *p = xmalloc((size_t)Tmax * sizeof(double));
    for (int b = 0; b < B; b++) {
        if (pos[b] < 0) continue;
        int n = pos[b] + 1 < Tmax ? pos[b] + 1 : Tmax;
        for (int h = 0; h < NH; h++) {
            const float *qr = q + ((size_t)b * NH + h) * hd;
            size_t base = (size_t)b * Tmax * NKV * hd + (size_t)(h / (NH / NKV)) * hd;
            double mx = -INFINITY, sum = 0;
            for (int s = 0; s < n; s++) {
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)qr[i] * kcache[base + (size_t)s * NKV * hd + i];
                p[s] = d / sqrt((double)hd);
                mx = p[s] > mx ? p[s] : mx;
            }
            for (int s = 0; s < n; s++) sum += p[s] = exp(p[s] - mx);
            for (int i = 0; i < hd; i++) {
                double o = 0;
                for (int s = 0; s < n; s++) o += p[s] / sum * vcache[base + (size_t)s * NKV * hd + i];
                out[((size_t)b * NH + h) * hd + i] = (float)o;
            }
        }
    }
    free(p);
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

void ref_swiglu_forward(float *out, const float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = (float)(gate[i] * sigmoid(gate[i]) * up[i]);
}

// d/dg [g s(g)] = s + g s (1 - s)
void ref_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                         const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double s = sigmoid(gate[i]);
        dgate[i] = (float)(dout[i] * up[i] * (s + gate[i] * s * (1 - s)));
        dup[i] = (float)(dout[i] * gate[i] * s);
    }
}

// logits z (V) of row n, their logsumexp
static double row_logits(double *z, const float *x, const float *W, int n, int C, int V) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < V; j++) {
        double s = 0;
        for (int c = 0; c < C; c++) s += (double)x[(size_t)n * C + c] * W[(size_t)j * C + c];
        z[j] = s;
        mx = s > mx ? s : mx;
    }
    for (int j = 0; j < V; j++) sum += exp(z[j] - mx);
    return mx + log(sum);
}

void ref_logprob_forward(float *logp, float *entropy, float *lse, const float *x, const float *W,
                         const int *targets, int N, int C, int V) {
    double *z = xmalloc((size_t)V * sizeof(double));
    for (int n = 0; n < N; n++) {
        double l = row_logits(z, x, W, n, C, V), h = 0;
        for (int j = 0; j < V; j++) h -= exp(z[j] - l) * (z[j] - l);
        lse[n] = (float)l;
        if (entropy) entropy[n] = (float)h;
        logp[n] = targets[n] < 0 ? 0.0f : (float)(z[targets[n]] - l);
    }
    free(z);
}

// dlogp/dz_j = [j = target] - p_j; dH/dz_j = -p_j (log p_j + H)
void ref_logprob_backward(float *dx, float *dW, const float *dlogp, const float *dentropy,
                          const float *x, const float *W, const int *targets, int N, int C, int V) {
    double *z = xmalloc((size_t)V * sizeof(double));
    for (int n = 0; n < N; n++) {
        if (targets[n] < 0) continue;
        double l = row_logits(z, x, W, n, C, V), h = 0;
        for (int j = 0; j < V; j++) h -= exp(z[j] - l) * (z[j] - l);
        for (int j = 0; j < V; j++) {
            double p = exp(z[j] - l);
            double g = dlogp[n] * ((j == targets[n]) - p);
            if (dentropy) g += dentropy[n] * -p * (z[j] - l + h);
            for (int c = 0; c < C; c++) {
                if (dx) dx[(size_t)n * C + c] += (float)(g * W[(size_t)j * C + c]);
                if (dW) dW[(size_t)j * C + c] += (float)(g * x[(size_t)n * C + c]);
            }
        }
    }
    free(z);
}

double ref_token_logp(const float *logits, int V, float temperature, int token) {
    double t = temperature > 0 ? temperature : 1.0, mx = -INFINITY, sum = 0;
    for (int j = 0; j < V; j++) mx = logits[j] / t > mx ? logits[j] / t : mx;
    for (int j = 0; j < V; j++) sum += exp(logits[j] / t - mx);
    return logits[token] / t - mx - log(sum);
}

double ref_sum_squares(const float *g, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * g[i];
    return s;
}

void ref_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                      int t) {
    double c1 = 1 - pow(beta1, t), c2 = 1 - pow(beta2, t);
    for (size_t i = 0; i < n; i++) {
        double g = (double)grads[i] * grad_scale;
        double mi = beta1 * (double)m[i] + (1 - beta1) * g, vi = beta2 * (double)v[i] + (1 - beta2) * g * g;
        m[i] = (float)mi;
        v[i] = (float)vi;
        params[i] = (float)(params[i] - lr * ((mi / c1) / (sqrt(vi / c2) + eps) + weight_decay * params[i]));
    }
}
