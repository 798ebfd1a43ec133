/* rvxsim: the device's sysfs view. Clients such as UCX find an adapter's PCI identity by resolving
 * ibv_device.ibdev_path and reading the PCI function's files two directories up, and read GID types
 * under ports/N/gid_attrs. The model has no kernel device, so it writes the same tree under the
 * fabric directory and points ibdev_path/dev_path there; a path outside /sys is all a client sees.
 *
 *   <fabric>/sys/devices/pci0000:00/0000:5N:00.0/{vendor,device,...}      the PCI function
 *   .../0000:5N:00.0/infiniband/mlx5_N/{board_id,fw_ver,...,ports/1/...}  the RDMA device
 *   <fabric>/sys/class/infiniband/mlx5_N -> ../../devices/...             as in /sys/class
 *   <fabric>/sys/class/infiniband_verbs/uverbsN/{ibdev,abi_version}
 *
 * Every process writes the same contents (files are replaced by rename, so readers never see a
 * half-written one); what is per process (LID, GUID) is not in the tree. */
#include "internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

static int mkdirs(const char *path)
{
	char buf[512];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -1;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

static int put(const char *dir, const char *file, const char *text)
{
	char path[640], tmp[680];
	int fd, n = (int)strlen(text);

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (write(fd, text, n) != n || close(fd) < 0 || rename(tmp, path) < 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static int link_to(const char *target, const char *path)
{
	if (symlink(target, path) == 0 || errno == EEXIST)
		return 0;
	return -1;
}

/* The GID types the model's port has (ibv_query_gid_type agrees). */
static int write_port(const char *ibdir)
{
	char d[512];
	int ngid = sim_env.link_eth ? 2 : 1;

	snprintf(d, sizeof(d), "%s/ports/1/gid_attrs/types", ibdir);
	if (mkdirs(d))
		return -1;
	for (int g = 0; g < ngid; g++) {
		char name[16];
		snprintf(name, sizeof(name), "%d", g);
		if (put(d, name, g == 1 ? "RoCE v2\n" : "IB/RoCE v1\n"))
			return -1;
	}
	snprintf(d, sizeof(d), "%s/ports/1", ibdir);
	return put(d, "link_layer", sim_env.link_eth ? "Ethernet\n" : "InfiniBand\n") ||
	       put(d, "state", "4: ACTIVE\n") || put(d, "phys_state", "5: LinkUp\n") ||
	       put(d, "cap_mask", "0x2651e848\n") ? -1 : 0;
}

static int write_device(struct sim_dev *dv, const char *root)
{
	char pci[400], ib[480], cls[400], verbs[400], rel[520];
	int i = dv->index;

	snprintf(pci, sizeof(pci), "%s/devices/pci0000:00/0000:5%d:00.0", root, i);
	snprintf(ib, sizeof(ib), "%s/infiniband/mlx5_%d", pci, i);
	if (mkdirs(ib) || write_port(ib))
		return -1;
	/* PCI identity: Mellanox vendor, ConnectX-6 (device id = the verbs part id) */
	char devid[16];
	snprintf(devid, sizeof(devid), "0x%04x\n", SIM_PART_ID);
	if (put(pci, "vendor", "0x15b3\n") || put(pci, "device", devid) ||
	    put(pci, "subsystem_vendor", "0x15b3\n") || put(pci, "subsystem_device", "0x0007\n") ||
	    put(pci, "class", "0x020700\n") || put(pci, "numa_node", "-1\n") ||
	    put(pci, "current_link_width", "16\n") || put(pci, "current_link_speed", "16.0 GT/s PCIe\n"))
		return -1;
	if (put(ib, "board_id", "RVXSIM_CX6\n") || put(ib, "fw_ver", "20.31.1014\n") ||
	    put(ib, "hw_rev", "0x0\n") || put(ib, "hca_type", "MT4123\n") ||
	    put(ib, "node_type", "1: CA\n"))
		return -1;
	snprintf(rel, sizeof(rel), "%s/device", ib);
	if (link_to("../../", rel))
		return -1;
	snprintf(cls, sizeof(cls), "%s/class/infiniband", root);
	snprintf(verbs, sizeof(verbs), "%s/class/infiniband_verbs/uverbs%d", root, i);
	if (mkdirs(cls) || mkdirs(verbs))
		return -1;
	snprintf(rel, sizeof(rel), "../../devices/pci0000:00/0000:5%d:00.0/infiniband/mlx5_%d", i, i);
	snprintf(cls + strlen(cls), sizeof(cls) - strlen(cls), "/mlx5_%d", i);
	if (link_to(rel, cls))
		return -1;
	char ibdev[16];
	snprintf(ibdev, sizeof(ibdev), "mlx5_%d\n", i);
	if (put(verbs, "ibdev", ibdev) || put(verbs, "abi_version", "1\n"))
		return -1;
	if (strlen(cls) >= sizeof(dv->dev.ibdev_path) || strlen(verbs) >= sizeof(dv->dev.dev_path))
		return -1;
	memcpy(dv->dev.ibdev_path, cls, strlen(cls) + 1);
	memcpy(dv->dev.dev_path, verbs, strlen(verbs) + 1);
	return 0;
}

/* Write the tree for every device the model can show. On failure the devices keep the /sys
 * paths (no client finds files there, as before). */
void sim_sysfs_init(struct sim_dev *devs, int n)
{
	char root[300];

	snprintf(root, sizeof(root), "%s/sys", sim_env.fabric_dir);
	if (strlen(root) > 200 || mkdirs(root)) {
		sim_log("rvxsim: cannot create the sysfs view under %s: %s", root, strerror(errno));
		return;
	}
	for (int i = 0; i < n; i++)
		if (write_device(&devs[i], root)) {
			sim_log("rvxsim: cannot write the sysfs view of mlx5_%d under %s: %s", i, root,
				strerror(errno));
			return;
		}
}
