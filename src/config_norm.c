/* The per-channel normalisation a data format brings (see config.h). */
#include "src/config.h"

#include <string.h>

#include "io/folder.h"

bool mp_config_channel_norm(const mp_config *c, double mean[3], double std[3])
{
    static const double cifar_mean[3] = {0.4914, 0.4822, 0.4465};
    static const double cifar_std[3] = {0.2470, 0.2435, 0.2616};
    static const double net_mean[3] = MP_FOLDER_MEAN, net_std[3] = MP_FOLDER_STD;
    bool cifar = strcmp(c->data.format, "cifar10") == 0;
    bool rgb_folder = strcmp(c->data.format, "folder") == 0 && c->data.channels == 3;
    if (!cifar && !rgb_folder)
        return false;
    memcpy(mean, cifar ? cifar_mean : net_mean, sizeof cifar_mean);
    memcpy(std, cifar ? cifar_std : net_std, sizeof cifar_std);
    return true;
}
