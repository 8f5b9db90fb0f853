// Argument and shape validation of the Backend ops (backend.h), shared by every backend so that
// all of them accept the same arguments and refuse the others with the same message. Each check
// is pure (shapes and parameters only, no storage): it returns the op's output shape or an
// InvalidArgument Status whose message starts with the op's name. What only one backend can know
// (a tensor made by another backend, a weight not uploaded with upload_weight, layouts) stays in
// that backend and is checked there.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/backend/op_params.h"
#include "core/base/status.h"
#include "core/tensor/host_tensor.h"

namespace seedvae {

// `s` is a 5-D activation shape [N, C, T, H, W]; "op: arg must be 5-D ..." otherwise.
Status check_rank5(const Shape& s, std::string_view op, std::string_view arg);

// Backend::upload / upload_weight: `host` holds exactly shape.numel() elements of its dtype.
// `what` names the call in the message ("upload", "upload_weight(encoder.conv_in.weight)").
Status check_upload(const HostTensor& host, std::string_view what);

// Backend::download_frames (and download_frames_async): `src` [N, C, T, H, W] fits at frames
// [frame_offset, frame_offset + T) of `dst`, an fp32 host tensor [N, C, T_dst, H, W].
Status check_download_frames(const Shape& src, const HostTensor& dst, int64_t frame_offset);

// Backend::conv3d: input x [N, Cin, T, H, W], weight w [Cout, Cin, kT, kH, kW], strides >= 1,
// padding >= 0, no empty dimension, padded input at least the kernel. Returns
// [N, Cout, (T - kT) / st + 1, (H + pt + pb - kH) / sh + 1, (W + pl + pr - kW) / sw + 1].
Result<Shape> conv3d_output_shape(const Shape& x, const Shape& w, const Conv3dParams& p);
// Backend::conv3d's optional bias: undefined, or [Cout] for the weight shape `w` (checked 5-D).
Status check_conv3d_bias(const Tensor& bias, const Shape& w);

// Backend::causal_pad: with `memory` (null: none) the output is [memory, x] along T, so both
// must agree outside the frame axis; without, `frames` >= 0 copies of x's first frame (which x
// must then have) go in front. Returns x's shape with T grown by memory's T or `frames`.
Result<Shape> causal_pad_shape(const Shape& x, const Shape* memory, int frames);

// Backend::slice_frames: 0 <= begin <= end <= T. Returns x's shape with end - begin frames.
Result<Shape> slice_frames_shape(const Shape& x, int64_t begin, int64_t end);

// Backend::copy_frames_into: same N, C, H, W, and both frame ranges inside their tensors.
Status check_frame_copy(const Shape& dst, int64_t dst_frame, const Shape& src, int64_t src_frame,
                        int64_t count);

// Backend::concat_frames: a and b agree outside the frame axis. Returns [a, b] along T.
Result<Shape> concat_frames_shape(const Shape& a, const Shape& b);

// Backend::group_norm (and group_norm_inplace, whose name `op` then gives): x is 5-D, its C
// channels split into p.groups >= 1 groups, eps >= 0, gamma and beta undefined or [C].
Status check_group_norm(const Shape& x, const Tensor& gamma, const Tensor& beta,
                        const GroupNormParams& p, std::string_view op = "group_norm");

// Backend::add_inplace: acc and x have one shape.
Status check_add(const Shape& acc, const Shape& x);

// Backend::depth_to_space: x is 5-D with a positive multiple of 4 * temporal_factor channels,
// temporal_factor is 1 or 2, drop_frame_1 only with factor 2 and at least one input frame.
// Returns [N, C / (4 Z), T * Z - drop_frame_1, 2H, 2W].
Result<Shape> depth_to_space_shape(const Shape& x, int temporal_factor, bool drop_frame_1);

// Backend::attention: x is 5-D with C >= 1 channels split into w.groups groups, eps >= 0, and
// every weight defined: the norm affine parameters and biases [C], the projections [C, C].
Status check_attention(const Shape& x, const AttentionWeights& w);

// ---- the Wan VAEs' ops (docs/model.md §10) ------------------------------------------

// Backend::zeros: a 5-D shape with no negative dimension.
Status check_zeros(const Shape& s);

// Backend::rms_norm: x is 5-D with C >= 1, eps > 0, gamma undefined or [C].
Status check_rms_norm(const Shape& x, const Tensor& gamma, const RmsNormParams& p);

// Backend::upsample_nearest: x is 5-D. Returns [N, C, T, 2H, 2W].
Result<Shape> upsample_nearest_shape(const Shape& x);

// Backend::frames_from_channels: x is 5-D, factor >= 1 divides C. Returns [N, C/f, T*f, H, W].
Result<Shape> frames_from_channels_shape(const Shape& x, int factor);

// Backend::patchify: x is 5-D, p >= 1 divides H and W. Returns [N, C*p*p, T, H/p, W/p].
// Backend::unpatchify: C a multiple of p*p. Returns [N, C/(p*p), T, H*p, W*p].
Result<Shape> patchify_shape(const Shape& x, int p);
Result<Shape> unpatchify_shape(const Shape& x, int p);

// Backend::avg_down: x is 5-D, ft and fs >= 1, fs divides H and W, Cout >= 1 divides Cin*f.
// Returns [N, Cout, ceil(T/ft), H/fs, W/fs].
Result<Shape> avg_down_shape(const Shape& x, const AvgDownParams& p);

// Backend::dup_up: x is 5-D, ft and fs >= 1, Cin divides Cout*f, and with drop_first T >= 1.
// Returns [N, Cout, T*ft - (drop_first ? ft - 1 : 0), H*fs, W*fs].
Result<Shape> dup_up_shape(const Shape& x, const DupUpParams& p);

// Backend::rms_attention: x is 5-D with C >= 1 channels, every weight defined: gamma and the
// biases [C], the projections [C, C].
Status check_rms_attention(const Shape& x, const RmsAttentionWeights& w);

}  // namespace seedvae
