// Host tensors <-> QImage, and the difference heatmap. Pure functions, callable on any thread
// (QImage without a paint device is thread-safe to create and fill).
#pragma once

#include <QImage>
#include <QVector>

#include "core/tensor/host_tensor.h"

namespace seedvae::ui {

// Frame `t` of a [1, 3, T, H, W] fp32 tensor in [-1, 1] as an RGB32 image, cropped to the
// top-left `width` x `height` (0: the whole frame). Values are clamped; NaN becomes black.
QImage frame_to_image(const HostTensor& video, qint64 t, int width = 0, int height = 0);
// Every frame of a clip, or frames [first, first + count) of it.
QVector<QImage> clip_to_images(const HostTensor& video, int width = 0, int height = 0,
                               qint64 first = 0, qint64 count = -1);

// |a - b| averaged over RGB, times `gain`, through a perceptual colour map (black - purple - red
// - yellow - white). Images of different sizes compare over their common top-left area.
QImage difference_heatmap(const QImage& a, const QImage& b, double gain);
// The colour map used by the heatmaps, value 0..255.
QRgb heat_color(int value);
// A colour bar image (width x height, left = 0) for legends.
QImage heat_legend(int width, int height);

}  // namespace seedvae::ui
