/* A Vulkan instance layer that lists one physical device: the one DMLCONFORM_VK_DEVICE numbers
 * (0-based, in the order the drivers list them). dmlconform pins a DirectML runner to one GPU of a
 * host with several this way: under Wine, wined3d makes its one D3D adapter of the first physical
 * device the loader lists, and vkd3d then looks that device up by UUID, so a runner that sees one
 * device runs on it. A device number the drivers do not have fails vkEnumeratePhysicalDevices with
 * a line on stderr, rather than running somewhere else.
 *
 * Loaded as an explicit layer: VK_LAYER_PATH names the directory of its manifest and
 * VK_INSTANCE_LAYERS=VK_LAYER_DMLCONFORM_device_pick enables it (backends/directml/gpus.py).
 * Built by scripts/setup_directml.sh; the portable stack carries the built library.
 */
#include <vulkan/vulkan.h>
#include <vulkan/vk_layer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static PFN_vkGetInstanceProcAddr next_proc_addr; /* the next layer's or the loader's: one per process */
/* the next layer's functions, looked up on the instance it created (as the loader wants: looked up
 * later, through the application's handle, they would come back to this layer) */
static PFN_vkEnumeratePhysicalDevices next_enumerate;
static PFN_vkGetPhysicalDeviceProperties next_properties;
static int announced;

static VkResult VKAPI_CALL pick_create_instance(const VkInstanceCreateInfo *info, const VkAllocationCallbacks *allocator,
                                               VkInstance *instance)
{
    VkLayerInstanceCreateInfo *link = (VkLayerInstanceCreateInfo *)info->pNext;
    while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO && link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerInstanceCreateInfo *)link->pNext;
    if (!link || !link->u.pLayerInfo)
        return VK_ERROR_INITIALIZATION_FAILED;
    next_proc_addr = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext; /* the next layer finds its own link */
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)next_proc_addr(VK_NULL_HANDLE, "vkCreateInstance");
    VkResult vr = create ? create(info, allocator, instance) : VK_ERROR_INITIALIZATION_FAILED;
    if (vr == VK_SUCCESS) {
        next_enumerate = (PFN_vkEnumeratePhysicalDevices)next_proc_addr(*instance, "vkEnumeratePhysicalDevices");
        next_properties = (PFN_vkGetPhysicalDeviceProperties)next_proc_addr(*instance, "vkGetPhysicalDeviceProperties");
    }
    return vr;
}

/* The wanted device number, or -1 (with a line on stderr) when the variable is missing or malformed. */
static int wanted_device(void)
{
    const char *text = getenv("DMLCONFORM_VK_DEVICE");
    char *end = NULL;
    long n = text ? strtol(text, &end, 10) : -1;
    if (!text || !*text || *end || n < 0 || n > 255) {
        fprintf(stderr, "dmlconform-vk-device: DMLCONFORM_VK_DEVICE=%s is not a device number\n", text ? text : "(unset)");
        return -1;
    }
    return (int)n;
}

static VkResult VKAPI_CALL pick_enumerate(VkInstance instance, uint32_t *count, VkPhysicalDevice *devices)
{
    PFN_vkEnumeratePhysicalDevices next = next_enumerate;
    uint32_t all = 0;
    VkResult vr = next(instance, &all, NULL);
    if (vr < 0)
        return vr;
    int wanted = wanted_device();
    if (wanted < 0)
        return VK_ERROR_INITIALIZATION_FAILED;
    if ((uint32_t)wanted >= all) {
        fprintf(stderr, "dmlconform-vk-device: DMLCONFORM_VK_DEVICE=%d but the Vulkan drivers list %u device(s)\n", wanted, all);
        return VK_ERROR_INITIALIZATION_FAILED;
    }
    VkPhysicalDevice *list = calloc(all, sizeof(*list));
    if (!list)
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    vr = next(instance, &all, list);
    if (vr < 0) {
        free(list);
        return vr;
    }
    if (!announced) {
        VkPhysicalDeviceProperties props;
        next_properties(list[wanted], &props);
        fprintf(stderr, "dmlconform-vk-device: listing device %d of %u: %s\n", wanted, all, props.deviceName);
        announced = 1;
    }
    VkResult result = VK_SUCCESS;
    if (!devices)
        *count = 1;
    else if (*count < 1)
        result = VK_INCOMPLETE;
    else {
        devices[0] = list[wanted];
        *count = 1;
    }
    free(list);
    return result;
}

static VkResult VKAPI_CALL pick_enumerate_groups(VkInstance instance, uint32_t *count, VkPhysicalDeviceGroupProperties *groups)
{
    VkPhysicalDevice device;
    uint32_t one = 1;
    VkResult vr = pick_enumerate(instance, &one, &device);
    if (vr < 0)
        return vr;
    if (!groups) {
        *count = 1;
        return VK_SUCCESS;
    }
    if (*count < 1)
        return VK_INCOMPLETE;
    groups[0].physicalDeviceCount = 1;
    memset(groups[0].physicalDevices, 0, sizeof(groups[0].physicalDevices));
    groups[0].physicalDevices[0] = device;
    groups[0].subsetAllocation = VK_FALSE;
    *count = 1;
    return VK_SUCCESS;
}

static PFN_vkVoidFunction VKAPI_CALL pick_proc_addr(VkInstance instance, const char *name)
{
    if (!strcmp(name, "vkGetInstanceProcAddr"))
        return (PFN_vkVoidFunction)pick_proc_addr;
    if (!strcmp(name, "vkCreateInstance"))
        return (PFN_vkVoidFunction)pick_create_instance;
    if (!strcmp(name, "vkEnumeratePhysicalDevices"))
        return (PFN_vkVoidFunction)pick_enumerate;
    if (!strcmp(name, "vkEnumeratePhysicalDeviceGroups") || !strcmp(name, "vkEnumeratePhysicalDeviceGroupsKHR"))
        return (PFN_vkVoidFunction)pick_enumerate_groups;
    return next_proc_addr ? next_proc_addr(instance, name) : NULL;
}

EXPORT VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *version)
{
    if (version->loaderLayerInterfaceVersion < 2)
        return VK_ERROR_INITIALIZATION_FAILED;
    version->loaderLayerInterfaceVersion = 2;
    version->pfnGetInstanceProcAddr = pick_proc_addr;
    version->pfnGetDeviceProcAddr = NULL;
    version->pfnGetPhysicalDeviceProcAddr = NULL;
    return VK_SUCCESS;
}
